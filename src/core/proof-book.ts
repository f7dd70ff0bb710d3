/**
 * The book of proofs' shape and the empty book: which key holds which endpoint (`Proof`), the seal
 * keys learnt, the asks awaiting an answer and the answers owed. The core's context holds one book
 * per lifetime (context.ts, `proofs`); only proofs.ts changes it. This file declares and creates
 * it, so the context can name it without importing the concern that works on it.
 */
import type { ResumeList, TaskEndpoint } from "../protocol/schemas.ts";

/** Which key holds an endpoint, that key's seal key, and the session name its proof claimed (unsigned). */
export interface Proof {
  readonly key: string;
  readonly sealKey: string;
  readonly session?: string;
}

/** This lifetime's proofs, seal keys and pending asks (changed only by proofs.ts). */
export interface ProofBook {
  readonly proven: Map<string, Proof>;
  /** Signing key → its seal key, once its binding verified. */
  readonly sealKeys: Map<string, string>;
  /** Asks awaiting an answer: hello id → the endpoint asked. */
  readonly asked: Map<string, TaskEndpoint>;
  /** When each endpoint was last asked (timers clock). */
  readonly lastAsked: Map<string, number>;
  /** Answers owed (with a resume answer when the ask was a resume question), sent by the next shipping phase. */
  readonly owed: { readonly to: TaskEndpoint; readonly inReplyTo: string; readonly resume?: ResumeList }[];
}

export function createProofBook(): ProofBook {
  return { proven: new Map(), sealKeys: new Map(), asked: new Map(), lastAsked: new Map(), owed: [] };
}
