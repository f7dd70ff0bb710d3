/**
 * What `pi-tasks conformance` hands to `bun test` (see ./runner.ts): the suite against the relay
 * named by the environment, requiring the listed features. Not named `*.test.ts`, so no test run
 * of this repository collects it by itself.
 */
import { CONFORMANCE_FEATURES_VARIABLE, CONFORMANCE_URL_VARIABLE, parseFeatures } from "./runner.ts";
import { runRelayConformance } from "./suite.ts";

const url = process.env[CONFORMANCE_URL_VARIABLE];
const features = process.env[CONFORMANCE_FEATURES_VARIABLE];
if (url === undefined || url === "" || features === undefined) {
  throw new Error(`${CONFORMANCE_URL_VARIABLE} and ${CONFORMANCE_FEATURES_VARIABLE} must be set: run this suite with pi-tasks conformance URL`);
}
runRelayConformance(() => url, { features: parseFeatures(features) });
