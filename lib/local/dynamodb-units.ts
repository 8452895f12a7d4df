/**
 * DynamoDB's capacity arithmetic, as AWS documents it, for the limits layer (dynamodb-limits.ts).
 *
 * Item size ("Item sizes and formats",
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
 * the sum of its attributes, each the UTF-8 length of its name plus its value: a string its UTF-8
 * length; a number 1 byte per two significant digits plus 1 (leading and trailing zeroes trimmed);
 * binary its length; null and boolean 1 byte; a list or map 3 bytes plus 1 byte per element plus its
 * elements; a set the sum of its elements.
 *
 * Units ("Read/write capacity mode",
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
 * a write costs 1 unit per 1 KB of the item, rounded up (for an update or a replacing put, the larger
 * of the item before and after; for a delete, the item deleted; a write whose condition fails still
 * costs the item's units, at least 1); a strongly consistent read 1 unit per 4 KB rounded up, an
 * eventually consistent one half that; a transactional read or write twice its plain cost
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html, "Capacity
 * management for transactions"); BatchGetItem and BatchWriteItem each of their items on its own.
 */

type AttributeValue = Record<string, unknown>;
export type Item = Record<string, AttributeValue>;

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/** A number's stored size: 1 byte per two significant digits, plus 1. */
function numberSize(text: string): number {
  const digits = text
    .replace(/^[-+]/, '')
    .replace(/[eE].*$/, '')
    .replace('.', '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(Math.max(digits.length, 1) / 2) + 1;
}

function valueSize(value: AttributeValue): number {
  if ('S' in value) return utf8(String(value.S));
  if ('N' in value) return numberSize(String(value.N));
  if ('B' in value) return Buffer.from(String(value.B), 'base64').length;
  if ('BOOL' in value || 'NULL' in value) return 1;
  if ('SS' in value) return (value.SS as string[]).reduce((sum, s) => sum + utf8(s), 0);
  if ('NS' in value) return (value.NS as string[]).reduce((sum, n) => sum + numberSize(n), 0);
  if ('BS' in value)
    return (value.BS as string[]).reduce((sum, b) => sum + Buffer.from(b, 'base64').length, 0);
  if ('L' in value) {
    const list = value.L as AttributeValue[];
    return 3 + list.reduce((sum, element) => sum + 1 + valueSize(element), 0);
  }
  if ('M' in value) {
    const map = value.M as Item;
    return 3 + Object.entries(map).reduce((sum, [name, v]) => sum + 1 + utf8(name) + valueSize(v), 0);
  }
  return 0;
}

export function itemSize(item: Item): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += utf8(name) + valueSize(value);
  return size;
}

/** Write units of an item of `bytes` (at least 1), doubled in a transaction. */
export function writeUnits(bytes: number, transactional = false): number {
  return Math.max(1, Math.ceil(bytes / 1024)) * (transactional ? 2 : 1);
}

/** Read units of an item of `bytes`: 4 KB a unit strongly consistent, half eventually, twice in a transaction. */
export function readUnits(bytes: number, consistent: boolean, transactional = false): number {
  const units = Math.max(1, Math.ceil(bytes / 4096));
  if (transactional) return units * 2;
  return consistent ? units : units / 2;
}
