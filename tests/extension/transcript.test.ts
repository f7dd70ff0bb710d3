/**
 * A spawned worker's transcript (src/host/transcript.ts) shows what arrived as a person reads it:
 * the task text and the answers, not the trust frame every piece of peer mail opens with (before,
 * each incoming message was cut inside that frame and the task text never showed).
 */
import { expect, test } from "bun:test";
import { renderEvent } from "../../extensions/pi-tasks/render.ts";
import type { Signer } from "../../src/core/trust.ts";
import { maxTranscriptLineChars } from "../../src/protocol/limits.ts";
import { transcriptLines } from "../../src/host/transcript.ts";
import { assignmentOf, taskView } from "../helpers/extension-fakes.ts";

const OWN = { verified: true, self: true, fingerprint: "f00a:7245:f6ba:c16a" } as unknown as Signer;

test("an incoming assignment shows its heading, task id, sender and task text, without the frame or quoting", () => {
  const task = taskView({ task: "Paint the banner red." });
  const content = renderEvent(assignmentOf(task), task, OWN);
  const [line] = transcriptLines(
    JSON.stringify({ type: "message_end", message: { role: "custom", customType: "pi-tasks-event", content } }),
  );
  expect(line).toMatch(/^\d\d:\d\d:\d\d \[pi-tasks-event\] ## task assignment - taskId: /);
  expect(line).toContain("signed by your own identity task: Paint the banner red.");
  expect(line).not.toContain("Peer mail from");
  expect(line).not.toContain("│");
  expect(line).not.toContain("eventId");
  expect(line!.length).toBeLessThanOrEqual("00:00:00 [pi-tasks-event] ".length + maxTranscriptLineChars);
});
