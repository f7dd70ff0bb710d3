/**
 * Custom types of what pi-tasks writes into a Pi session, read back outside the extension (the
 * `pi-tasks audit` command, the demo): a task event shown to the model, an event archived out of its
 * sight, and a kept audit report.
 */
export const EVENT_MESSAGE = "pi-tasks-event";
export const EVENT_RECORD = "pi-tasks-event-record";
export const AUDIT_ENTRY = "pi-tasks-audit";
