/**
 * A yes/no question to the person at the controlling terminal (`/dev/tty`), for the decisions the
 * shell's commands must not take by themselves (pairing). A process without a controlling terminal
 * — a Pi model's bash tool runs its commands in a new session, without one — cannot be asked, and
 * gets `undefined`: the caller refuses.
 */
import { closeSync, openSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { ReadStream, WriteStream } from "node:tty";

const CONTROLLING_TERMINAL = "/dev/tty";

/** True on an explicit yes, false on anything else; undefined when there is no terminal to ask. */
export async function confirmOnTerminal(question: string): Promise<boolean | undefined> {
  let readFd: number;
  let writeFd: number;
  try {
    readFd = openSync(CONTROLLING_TERMINAL, "r");
  } catch {
    return undefined;
  }
  try {
    writeFd = openSync(CONTROLLING_TERMINAL, "w");
  } catch {
    closeSync(readFd);
    return undefined;
  }
  const input = new ReadStream(readFd);
  const output = new WriteStream(writeFd);
  const prompt = createInterface({ input, output, terminal: false });
  try {
    const answer = await prompt.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    prompt.close();
    input.destroy();
    output.destroy();
  }
}
