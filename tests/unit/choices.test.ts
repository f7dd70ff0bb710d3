/**
 * The checks of src/core/choices.ts on their own, with the code each side uses: INVALID_REQUEST where
 * an answer is written, INVALID_INTENT where a worker's answer becomes canonical at the origin.
 */
import { describe, expect, test } from "bun:test";
import { checkChoiceAnswer, choiceFields } from "../../src/core/choices.ts";
import type { CoreStore } from "../../src/core/bookkeeping.ts";
import { thrown } from "../../testkit/async.ts";

const store = (payload: Record<string, unknown>) => ({ getEvent: () => ({ payload }) }) as unknown as CoreStore;

describe("checkChoiceAnswer", () => {
  test("an answer to a question with choices is exactly one of them; the origin refuses another as INVALID_INTENT", () => {
    const asked = store({ message: "?", choices: ["a", "b"] });
    expect(() => checkChoiceAnswer(asked, "q", "a")).not.toThrow();
    expect(thrown(() => checkChoiceAnswer(asked, "q", "A")).code).toBe("INVALID_REQUEST");
    expect(thrown(() => checkChoiceAnswer(asked, "q", "c", "INVALID_INTENT")).code).toBe("INVALID_INTENT");
  });

  test("a question without choices, or no question named, takes any answer", () => {
    expect(() => checkChoiceAnswer(store({ message: "?" }), "q", "anything")).not.toThrow();
    expect(() => checkChoiceAnswer(store({ message: "?", choices: ["a"] }), undefined, "anything")).not.toThrow();
  });
});

describe("choiceFields", () => {
  test("copies valid choices and the suggested one; nothing when none is given", () => {
    expect(choiceFields({ type: "question", choices: ["a", "b"], defaultChoice: "b" })).toEqual({
      choices: ["a", "b"],
      defaultChoice: "b",
    });
    expect(choiceFields({ type: "answer" })).toEqual({});
  });

  // Guards src/core/choices.ts choiceFields: each refusal carries the caller's code (INVALID_INTENT at the origin's intake).
  test("each refusal carries the code its caller names: INVALID_REQUEST where written, INVALID_INTENT where made canonical", () => {
    const cases: { params: Parameters<typeof choiceFields>[0]; path: string }[] = [
      { params: { type: "information", choices: ["a", "b"] }, path: "/choices" },
      { params: { type: "question", defaultChoice: "a" }, path: "/defaultChoice" },
      { params: { type: "question", choices: ["a", "a"] }, path: "/choices" },
      { params: { type: "question", choices: ["a", "b"], defaultChoice: "c" }, path: "/defaultChoice" },
    ];
    for (const { params, path } of cases) {
      const written = thrown(() => choiceFields(params));
      const canonical = thrown(() => choiceFields(params, "INVALID_INTENT"));
      expect({ params, codes: [written.code, canonical.code], path: canonical.details.path }).toEqual({
        params,
        codes: ["INVALID_REQUEST", "INVALID_INTENT"],
        path,
      });
    }
  });
});
