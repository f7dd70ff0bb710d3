/**
 * Questions with choices: a question may offer the answers it accepts (`choices`, with a suggested
 * `defaultChoice`); its answer must then be exactly one of them — checked where the answer is
 * written (`INVALID_REQUEST`, nothing sent) and again where it becomes canonical (a worker's answer
 * intent at the origin: `INVALID_INTENT`). An answer to a question raised up a chain goes down to the
 * sub-task only when that question accepts it (intake.ts). The person picks one in a select dialog
 * (extensions/pi-tasks/questions.ts); a model answers with one of them.
 */
import { TaskError } from "../protocol/errors.ts";
import type { MessageParams } from "../protocol/schemas.ts";
import type { CoreStore } from "./bookkeeping.ts";

function refuse(code: "INVALID_REQUEST" | "INVALID_INTENT", message: string, details: Record<string, unknown>): TaskError {
  return new TaskError(code, { message, details });
}

/** The choice fields of a new message: only a question has them, without duplicates, its default among them. */
export function choiceFields(
  params: Pick<MessageParams, "type" | "choices" | "defaultChoice">,
  code: "INVALID_REQUEST" | "INVALID_INTENT" = "INVALID_REQUEST",
): { choices?: string[]; defaultChoice?: string } {
  const { choices, defaultChoice } = params;
  if (choices === undefined && defaultChoice === undefined) return {};
  if (params.type !== "question") throw refuse(code, "only a question offers choices", { path: "/choices" });
  if (choices === undefined) throw refuse(code, "a default choice needs choices", { path: "/defaultChoice" });
  if (new Set(choices).size !== choices.length)
    throw refuse(code, "the choices must differ from each other", { path: "/choices", choices });
  if (defaultChoice !== undefined && !choices.includes(defaultChoice)) {
    throw refuse(code, "the default choice must be one of the choices", { path: "/defaultChoice", choices, defaultChoice });
  }
  return { choices: [...choices], ...(defaultChoice === undefined ? {} : { defaultChoice }) };
}

/** Whether `message` may answer the question `questionId`: any text, or exactly one of its choices when it offers them. */
export function fitsChoices(store: CoreStore, questionId: string, message: string): boolean {
  const choices = store.getEvent(questionId)?.payload.choices;
  return !Array.isArray(choices) || choices.includes(message);
}

/** An answer to a question with choices must be exactly one of them. */
export function checkChoiceAnswer(
  store: CoreStore,
  inReplyTo: string | undefined,
  message: string,
  code: "INVALID_REQUEST" | "INVALID_INTENT" = "INVALID_REQUEST",
): void {
  if (inReplyTo === undefined || fitsChoices(store, inReplyTo, message)) return;
  const choices = store.getEvent(inReplyTo)?.payload.choices as string[];
  throw refuse(
    code,
    `the answer must be exactly one of the question's choices: ${choices.map((choice) => JSON.stringify(choice)).join(", ")}`,
    {
      path: "/message",
      inReplyTo,
      choices,
    },
  );
}
