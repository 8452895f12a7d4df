/**
 * Lambda's event filter rules as the local stand-in for an event source mapping applies them
 * (watch-stream.ts): a record passes a filter when every key of the pattern matches the record's value
 * at the same path (nested objects), a list of rules matches when any one does: a string or number
 * equals the value, `{ prefix }` begins it, `{ exists }` is whether it is there. Any other rule throws,
 * so a filter the deployed mapping evaluates differently cannot pass here unnoticed. A record passes the
 * mapping when any of its filters matches ("Control which events Lambda sends to your function").
 */
type Rule = string | number | { prefix?: string; exists?: boolean };

function ruleMatches(rule: Rule, value: unknown): boolean {
  if (typeof rule === 'string' || typeof rule === 'number') return value === rule;
  const keys = Object.keys(rule);
  if (keys.length === 1 && rule.prefix !== undefined)
    return typeof value === 'string' && value.startsWith(rule.prefix);
  if (keys.length === 1 && rule.exists !== undefined) return (value !== undefined) === rule.exists;
  throw new Error(`a filter rule the local event source mapping does not evaluate: ${JSON.stringify(rule)}`);
}

function patternMatches(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) return pattern.some((rule: Rule) => ruleMatches(rule, value));
  if (pattern && typeof pattern === 'object')
    return Object.entries(pattern).every(([key, inner]) =>
      patternMatches(inner, (value as Record<string, unknown> | undefined)?.[key]),
    );
  throw new Error(`a filter pattern must be objects and lists of rules: ${JSON.stringify(pattern)}`);
}

/** Whether any of the mapping's filters passes the record (no filters: every record). */
export const passes = (filters: readonly unknown[], record: unknown): boolean =>
  filters.length === 0 || filters.some((filter) => patternMatches(filter, record));
