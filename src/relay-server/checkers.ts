/**
 * The relay's compiled checkers: every request schema of src/protocol/wire.ts and the wire
 * envelope, compiled once with TypeCompiler when the relay loads. (The client checks replies with
 * `checkValue` instead: inside Pi, `@sinclair/typebox` is typebox 1.x, which 0.34's TypeCompiler
 * cannot compile.)
 */
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { WireEnvelope } from "../protocol/schemas.ts";
import type { ValueModule } from "../protocol/validate.ts";
import { RELAY_REQUESTS, type RelayOperation } from "../protocol/wire.ts";

function compiled(schema: TSchema): ValueModule {
  const checker = TypeCompiler.Compile(schema);
  return { Check: (_schema, value) => checker.Check(value), Errors: (_schema, value) => checker.Errors(value) };
}

export const REQUEST_CHECKERS = Object.fromEntries(
  Object.entries(RELAY_REQUESTS).map(([operation, schema]) => [operation, compiled(schema)]),
) as Record<RelayOperation, ValueModule>;

export const ENVELOPE_CHECKER = compiled(WireEnvelope);
