/**
 * Stripe's request encoding, as its SDK writes it: `application/x-www-form-urlencoded` with nested
 * keys in brackets (`payment_intent_data[metadata][accountId]=a`, `line_items[0][quantity]=1`), for
 * a POST's body and a GET's query alike. Every value arrives as a string.
 */

export type FormValue = string | FormValue[] | { [key: string]: FormValue };
export type FormObject = { [key: string]: FormValue };

/** `a[b][0][c]` -> ['a', 'b', '0', 'c']. */
function keyPath(key: string): string[] {
  const head = /^[^[]*/.exec(key)?.[0] ?? '';
  const rest = [...key.slice(head.length).matchAll(/\[([^\]]*)\]/g)].map((m) => m[1] ?? '');
  return [head, ...rest];
}

export function parseForm(encoded: string): FormObject {
  const root: FormObject = {};
  for (const [key, value] of new URLSearchParams(encoded)) {
    const path = keyPath(key);
    let node: FormObject | FormValue[] = root;
    path.forEach((part, i) => {
      const last = i === path.length - 1;
      const container = node as Record<string, FormValue>;
      // An index of an array (`[0]`, or `[]` appending) or a key of an object.
      const slot = Array.isArray(node) && part === '' ? String(node.length) : part;
      if (last) {
        container[slot] = value;
        return;
      }
      const nextIsIndex = /^\d*$/.test(path[i + 1] ?? '');
      container[slot] ??= nextIsIndex ? [] : {};
      node = container[slot] as FormObject | FormValue[];
    });
  }
  return root;
}

/** A form value as an object (absent or a plain string: an empty one). */
export const formObject = (value: FormValue | undefined): FormObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? value : {};

/** A form value as a list (an object with numeric keys counts, in key order). */
export function formList(value: FormValue | undefined): FormValue[] {
  if (Array.isArray(value)) return value.filter((v) => v !== undefined);
  if (typeof value === 'object' && value !== null)
    return Object.keys(value)
      .sort((a, b) => Number(a) - Number(b))
      .map((k) => value[k] as FormValue);
  return [];
}

/** A form value as text (absent: undefined). */
export const formText = (value: FormValue | undefined): string | undefined =>
  typeof value === 'string' ? value : undefined;

/** A form value as metadata: string values only, as Stripe keeps them. */
export function formMetadata(value: FormValue | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(formObject(value)).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string',
    ),
  );
}
