/**
 * The fault proxy's rules, in push order: which request a rule matches (its operation name, list
 * or `"*"`, and its optional `when` predicate), and the rule book that hands out a matching rule
 * with uses left, counting its hits.
 */
import type { FaultRule, ProxyRequest, RuleHandle } from "./types.ts";

function matches(rule: FaultRule, request: ProxyRequest): boolean {
  const wanted = rule.operation;
  const hit = wanted === "*" || (typeof wanted === "string" ? wanted === request.operation : wanted.includes(request.operation));
  return hit && (rule.when === undefined || rule.when(request));
}

interface LiveRule {
  readonly rule: FaultRule;
  remaining: number;
  hits: number;
}

export interface RuleBook {
  /** Adds a rule after the existing ones. */
  push(rule: FaultRule): RuleHandle;
  /** The first rule that matches `request` and has uses left, consumed; undefined when none does. */
  take(request: ProxyRequest): FaultRule | undefined;
  /** Removes every rule. */
  clear(): void;
}

export function createRuleBook(): RuleBook {
  let rules: LiveRule[] = [];
  return {
    push(rule) {
      const live: LiveRule = { rule, remaining: rule.times ?? 1, hits: 0 };
      rules.push(live);
      return {
        hits: () => live.hits,
        remaining: () => live.remaining,
        cancel: () => {
          rules = rules.filter((candidate) => candidate !== live);
        },
      };
    },
    take(request) {
      for (const live of rules) {
        if (live.remaining <= 0 || !matches(live.rule, request)) continue;
        live.remaining -= 1;
        live.hits += 1;
        return live.rule;
      }
      return undefined;
    },
    clear() {
      rules = [];
    },
  };
}
