/**
 * A zod issue of the request schema (schemas.ts) as OpenAI's 400: which field (`param`, as a path
 * like `messages[1].content`), what kind of problem (missing, wrong type, out of range, unknown
 * value) and what was expected, with a client's keys and values shortened.
 */
import type * as z from 'zod';
import { BadRequestError } from './errors.js';

/** A client's own key (of `metadata`, a forwarded object) as it may appear in an error: bounded. */
function shortKey(key: PropertyKey): string {
  const text = String(key);
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
}

/** `messages.1.tool_call_id` -> `messages[1].tool_call_id` (keys longer than 64 characters shortened) */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, key) =>
      typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${shortKey(key)}` : shortKey(key),
    '',
  );
}

/** What a JSON value is, in the words of an error message. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a number';
  return `a ${typeof value}`;
}

export function show(value: unknown): string {
  const json = JSON.stringify(value);
  return json === undefined ? String(value) : json.length > 60 ? `${json.slice(0, 57)}...` : json;
}

/** Descends into a union's branches to the issue that names the deepest field (the most useful one). */
function deepest(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return issue;
  // Every branch wanted another type for this very value: a type error, expecting any of them.
  const firsts = issue.errors.map((branch) => branch[0]);
  if (firsts.every((inner) => inner?.code === 'invalid_type' && inner.path.length === 0)) {
    const expected = [...new Set(firsts.map((inner) => (inner as { expected: string }).expected))];
    return {
      ...(firsts[0] as z.core.$ZodIssue),
      path: issue.path,
      expected: expected.join(' or '),
    } as z.core.$ZodIssue;
  }
  // One branch took the value's type and failed within it (`stop`: an array of 5 strings): its
  // issue says what is wrong, not "none of the accepted shapes".
  const typed = issue.errors.filter(
    (branch) => !(branch[0]?.code === 'invalid_type' && branch[0].path.length === 0),
  );
  let best: z.core.$ZodIssue = issue;
  if (typed.length === 1 && typed[0]?.[0])
    best = deepest({ ...typed[0][0], path: [...issue.path, ...typed[0][0].path] } as z.core.$ZodIssue);
  for (const branch of issue.errors) {
    for (const inner of branch) {
      const candidate = deepest({ ...inner, path: [...issue.path, ...inner.path] } as z.core.$ZodIssue);
      if (candidate.path.length > best.path.length) best = candidate;
    }
  }
  return best;
}

/** One zod issue as OpenAI's 400: which field, what kind of problem, what was expected. */
export function toBadRequest(first: z.core.$ZodIssue): BadRequestError {
  const issue = deepest(first);
  const field = formatPath(issue.path);
  const param = field || null;
  const where = field ? `'${field}'` : 'the request body';
  let input = (issue as { input?: unknown }).input;
  // A discriminated union whose tag matched no branch (`role`, `type`): zod's input is the whole object
  // and its path ends at the tag; judge the tag itself (absent, wrong type, or an unknown value).
  const tagged = issue as { discriminator?: string; options?: unknown[] };
  if (issue.code === 'invalid_union' && tagged.discriminator && issue.errors.length === 0) {
    const owner = input;
    input =
      typeof owner === 'object' && owner !== null && !Array.isArray(owner)
        ? (owner as Record<string, unknown>)[tagged.discriminator]
        : undefined;
    if (input !== undefined && typeof input !== 'string')
      return new BadRequestError(
        `Invalid type for ${where}: expected string, but got ${kindOf(input)}.`,
        param,
        'invalid_type',
      );
    if (input !== undefined)
      return new BadRequestError(
        `Invalid value for ${where}: ${show(input)}. Supported values are: ${(tagged.options ?? [])
          .map((v) => `'${String(v)}'`)
          .join(', ')}.`,
        param,
        'invalid_value',
      );
  }
  if (input === undefined && issue.code !== 'custom')
    return new BadRequestError(
      `Missing required parameter: '${field}'.`,
      param,
      'missing_required_parameter',
    );
  switch (issue.code) {
    case 'invalid_type':
      // JSON.parse reads a number too large for a double (1e400) as Infinity.
      if (typeof input === 'number' && !Number.isFinite(input))
        return new BadRequestError(
          `Invalid ${where}: the number is too large to represent; expected a finite number.`,
          param,
          'out_of_range',
        );
      if (input === undefined)
        return new BadRequestError(
          `Missing required parameter: '${field}'.`,
          param,
          'missing_required_parameter',
        );
      return new BadRequestError(
        `Invalid type for ${where}: expected ${issue.expected === 'int' ? 'an integer' : issue.expected}, but got ${kindOf(input)}.`,
        param,
        'invalid_type',
      );
    case 'too_small':
    case 'too_big': {
      const limit = String(issue.code === 'too_small' ? issue.minimum : issue.maximum);
      const bound = issue.code === 'too_small' ? 'below the minimum' : 'above the maximum';
      const verb = limit === '1' ? 'is' : 'are';
      const allowed =
        issue.code === 'too_small'
          ? `at least ${limit} ${verb} required`
          : `at most ${limit} ${verb} allowed`;
      const what =
        issue.origin === 'array'
          ? `${Array.isArray(input) ? input.length : '?'} items; ${allowed}`
          : issue.origin === 'string'
            ? `a string of length ${typeof input === 'string' ? input.length : '?'}, ${bound} of ${limit}`
            : `${show(input)}, ${bound} of ${limit}`;
      // zod's own wording ("Too big: ...") says it again; a reason written in the schema adds to it.
      const reason = /^Too (big|small)/.test(issue.message) ? '' : ` (${issue.message})`;
      return new BadRequestError(`Invalid ${where}: ${what}${reason}.`, param, 'out_of_range');
    }
    case 'invalid_value':
      return new BadRequestError(
        `Invalid value for ${where}: ${show(input)}. ${
          issue.values.length > 0 && issue.path[0] !== 'tool_choice'
            ? `Supported values are: ${issue.values.map((v) => `'${String(v)}'`).join(', ')}.`
            : issue.message
        }`,
        param,
        'invalid_value',
      );
    case 'invalid_union':
      return new BadRequestError(
        `Invalid value for ${where}: ${show(input)} matches none of the accepted shapes.`,
        param,
        'invalid_value',
      );
    default:
      return new BadRequestError(`Invalid value for ${where}: ${issue.message}`, param, 'invalid_value');
  }
}
