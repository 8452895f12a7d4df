/**
 * A list request's parameters checked as Stripe checks them: a parameter it does not know is refused
 * (400 `parameter_unknown`, "Received unknown parameter: <name>", nested names in brackets), as are an
 * integer or a boolean that does not parse, a `limit` outside 1-100, and a range (`created`) with keys
 * other than gt, gte, lt and lte.
 */
import { type FormObject, type FormValue, formList, formObject, formText } from './form.js';
import { StripeApiError } from './state.js';

/** How each known parameter is written: text, an integer, a boolean, a list of text, a range of integers. */
export type ParamKind = 'text' | 'integer' | 'boolean' | 'list' | 'range';

/** The parameters every list takes (Stripe's pagination, and expand). */
export const LIST_PARAMS: Record<string, ParamKind> = {
  ending_before: 'text',
  expand: 'list',
  limit: 'integer',
  starting_after: 'text',
};

const unknown = (name: string) =>
  new StripeApiError(400, `Received unknown parameter: ${name}`, { code: 'parameter_unknown', param: name });

const integerOf = (name: string, value: FormValue | undefined): number => {
  const text = formText(value);
  if (text === undefined || !/^-?\d+$/.test(text))
    throw new StripeApiError(
      400,
      `Invalid integer: ${typeof value === 'string' ? value : JSON.stringify(value)}`,
      {
        code: 'parameter_invalid_integer',
        param: name,
      },
    );
  return Number(text);
};

/** A range filter as Stripe takes it: an exact integer, or `[gt]`, `[gte]`, `[lt]`, `[lte]`. */
export interface Range {
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
}

export const inRange = (value: number, range: Range | undefined): boolean =>
  !range ||
  ((range.gt === undefined || value > range.gt) &&
    (range.gte === undefined || value >= range.gte) &&
    (range.lt === undefined || value < range.lt) &&
    (range.lte === undefined || value <= range.lte));

/** The parameters, checked against `known`, each parsed as its kind. */
export function checkParams(
  form: FormObject,
  known: Record<string, ParamKind>,
): {
  text: (name: string) => string | undefined;
  integer: (name: string) => number | undefined;
  boolean: (name: string) => boolean | undefined;
  list: (name: string) => string[] | undefined;
  range: (name: string) => Range | undefined;
} {
  for (const [name, value] of Object.entries(form)) {
    const kind = known[name];
    if (!kind) throw unknown(name);
    if (kind === 'range' && typeof value === 'object' && !Array.isArray(value)) {
      for (const key of Object.keys(value))
        if (!['gt', 'gte', 'lt', 'lte'].includes(key)) throw unknown(`${name}[${key}]`);
    } else if ((kind === 'text' || kind === 'integer' || kind === 'boolean') && typeof value !== 'string') {
      throw new StripeApiError(400, `Invalid ${kind === 'text' ? 'string' : kind}: an object`, {
        param: name,
      });
    }
  }
  const limit = form.limit === undefined ? undefined : integerOf('limit', form.limit);
  if (limit !== undefined && (limit < 1 || limit > 100))
    throw new StripeApiError(
      400,
      'This value must be greater than or equal to 1 and less than or equal to 100.',
      {
        param: 'limit',
      },
    );
  return {
    text: (name) => formText(form[name]),
    integer: (name) => (form[name] === undefined ? undefined : integerOf(name, form[name])),
    boolean: (name) => {
      const text = formText(form[name]);
      if (text === undefined) return undefined;
      if (text !== 'true' && text !== 'false')
        throw new StripeApiError(400, `Invalid boolean: ${text}`, { param: name });
      return text === 'true';
    },
    list: (name) => (form[name] === undefined ? undefined : formList(form[name]).map(String)),
    range: (name) => {
      const value = form[name];
      if (value === undefined) return undefined;
      if (typeof value === 'string') {
        const exact = integerOf(name, value);
        return { gte: exact, lte: exact };
      }
      const object = formObject(value);
      const range: Range = {};
      for (const key of ['gt', 'gte', 'lt', 'lte'] as const)
        if (object[key] !== undefined) range[key] = integerOf(`${name}[${key}]`, object[key]);
      return range;
    },
  };
}

/**
 * One page of `items` (newest first) as Stripe pages a list: after the `starting_after` object, or
 * the page just before the `ending_before` object; a cursor is placed by the object itself, in
 * `ordered` (every object, newest first), so that it still works after the object left the filter.
 */
export function page<T extends { id: string }>(
  url: string,
  ordered: T[],
  matches: (item: T) => boolean,
  params: { limit: number | undefined; startingAfter: string | undefined; endingBefore: string | undefined },
  kind: string,
): { object: 'list'; data: T[]; has_more: boolean; url: string } {
  const limit = params.limit ?? 10;
  const position = (id: string, param: string) => {
    const at = ordered.findIndex((item) => item.id === id);
    if (at < 0)
      throw new StripeApiError(400, `No such ${kind}: '${id}'`, { code: 'resource_missing', param });
    return at;
  };
  if (params.startingAfter && params.endingBefore)
    throw new StripeApiError(
      400,
      'You may only specify one of these parameters: ending_before, starting_after.',
      {
        code: 'parameters_exclusive',
        param: 'starting_after',
      },
    );
  if (params.endingBefore) {
    const before = ordered.slice(0, position(params.endingBefore, 'ending_before')).filter(matches);
    return {
      object: 'list',
      data: before.slice(-limit),
      has_more: before.length > limit,
      url,
    };
  }
  const start = params.startingAfter ? position(params.startingAfter, 'starting_after') + 1 : 0;
  const after = ordered.slice(start).filter(matches);
  return { object: 'list', data: after.slice(0, limit), has_more: after.length > limit, url };
}
