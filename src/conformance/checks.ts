/**
 * Every conformance check, in the order a run reports them: one group per file of ./groups/.
 * Checks of additions the run does not require are listed too (the runner skips them; see
 * `isRequired`).
 */
import type { ConformanceCheck } from "./kit.ts";
import { additionChecks } from "./groups/additions.ts";
import { batchChecks } from "./groups/batches.ts";
import { admissionChecks } from "./groups/admission.ts";
import { bindingSecretChecks } from "./groups/binding-secret.ts";
import { cursorChecks } from "./groups/cursors.ts";
import { dedupeChecks } from "./groups/dedupe.ts";
import { errorTableChecks } from "./groups/error-table.ts";
import { healthChecks } from "./groups/health.ts";
import { limitChecks } from "./groups/limits.ts";
import { profileChecks } from "./groups/profile.ts";
import { registrationChecks } from "./groups/registrations.ts";
import { strictChecks } from "./groups/strict.ts";

/** The checks of a run that requires `features` (one check's name lists them). */
export function conformanceChecks(features: readonly string[]): ConformanceCheck[] {
  return [
    ...profileChecks(features),
    ...errorTableChecks,
    ...limitChecks,
    ...registrationChecks,
    ...dedupeChecks,
    ...cursorChecks,
    ...healthChecks,
    ...additionChecks,
    ...batchChecks,
    ...bindingSecretChecks,
    ...strictChecks,
    ...admissionChecks,
  ];
}
