/** The real relay through its CLI, shared with the demo. */
export * from "../../src/demo/relay-process.ts";
