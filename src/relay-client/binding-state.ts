/**
 * A relay session's binding as one immutable value, held in one variable and replaced whole.
 *
 * Everything that describes one binding lifetime changes together: its status, its generation,
 * the name it registers under, the features the relay advertised, the bound endpoint with its
 * epoch and lease, and the fence that stops the calls made under it. Kept as loose variables,
 * a call resuming after an await could pair an old binding's endpoint with a new lifetime's
 * fence or name. Here every transition — bind (connect or renewal), retire, restart (rebind),
 * close — builds a new value and swaps it in one assignment, so a reader sees the old state or
 * the new one, never parts of both. A caller that awaited compares its snapshot's fence with the
 * current one to learn whether its lifetime still holds.
 */
import { nanoid } from "nanoid";
import { TaskError } from "../protocol/errors.ts";
import type { Binding, SessionStatus } from "./session-types.ts";

export interface BindingState {
  readonly status: SessionStatus;
  /** Opaque per-lifetime generation sent on connect (the wire allows any 1–512 characters). */
  readonly generation: string;
  /** The name this lifetime registers under: the session's own, or one derived from it (`rebind`). */
  readonly registeredName: string;
  /** What the relay's profile advertised; loaded by the lifetime's first connect. */
  readonly features: ReadonlySet<string> | undefined;
  /** Endpoint, epoch and lease of the last successful connect (still shown after a reset). */
  readonly bound: Binding | undefined;
  /** Aborted when the lifetime ends (retired, rebound, closed): fences the calls made under it. */
  readonly fence: AbortController;
}

/** A state bound operations can run under. */
export type ReadyState = BindingState & { readonly status: "ready"; readonly bound: Binding };

export function isReady(state: BindingState): state is ReadyState {
  return state.status === "ready" && state.bound !== undefined;
}

export interface BindingHolder {
  /** The state now. A caller that awaits reads it again afterwards instead of keeping parts of it. */
  current(): BindingState;
  /** Records the profile's features, unless the lifetime behind `fence` has ended meanwhile. */
  withFeatures(fence: AbortController, features: ReadonlySet<string>): void;
  /** A connect (or renewal) succeeded: the state becomes ready with `bound`. */
  bind(bound: Binding): ReadyState;
  /** Retires a ready or unbound binding (status `reset`, fence aborted with `reason`); false when it was not. */
  retire(reason: TaskError): boolean;
  /** Ends the lifetime and starts an unbound one: new fence, new generation, own name, no features. */
  restart(): void;
  /** The current lifetime registers under `registeredName` from its next connect. */
  rename(registeredName: string): void;
  /** Closes for good (fence aborted); false when it already was. */
  close(): boolean;
}

function unboundState(callerSession: string): BindingState {
  return {
    status: "unbound",
    generation: nanoid(),
    registeredName: callerSession,
    features: undefined,
    bound: undefined,
    fence: new AbortController(),
  };
}

export function createBindingHolder(callerSession: string): BindingHolder {
  let state = unboundState(callerSession);
  return {
    current: () => state,
    withFeatures(fence, features) {
      if (state.fence === fence) state = { ...state, features };
    },
    bind(bound) {
      const next: ReadyState = { ...state, status: "ready", bound };
      state = next;
      return next;
    },
    retire(reason) {
      const retired = state;
      if (retired.status !== "ready" && retired.status !== "unbound") return false;
      state = { ...retired, status: "reset" };
      retired.fence.abort(reason);
      return true;
    },
    restart() {
      state.fence.abort(new TaskError("RELAY_RESET"));
      state = unboundState(callerSession);
    },
    rename(registeredName) {
      state = { ...state, registeredName };
    },
    close() {
      const closed = state;
      if (closed.status === "closed") return false;
      state = { ...closed, status: "closed" };
      closed.fence.abort(new TaskError("RELAY_CLOSED"));
      return true;
    },
  };
}
