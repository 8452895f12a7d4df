import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

/**
 * Checks what clients receive against OpenAI's own published schemas (a subset of its OpenAPI
 * description, copied from the shared contracts into test/contract/schemas). Every JSON body and
 * every stream chunk a contract test sees passes through `validatingFetch`.
 *
 * Deliberate differences from OpenAI, each checked explicitly rather than skipped:
 * - 402 has the spec's flat body {error, balance, message, topUpUrl}, not OpenAI's error object.
 * - `usage.cost` (spec) and a model's `display_name` (spec) are extra fields; OpenAI's schemas
 *   allow extra fields, so they validate, and the tests assert their presence.
 * - A stream that fails after its first byte ends with one chunk whose finish_reason is "error"
 *   and which carries an `error` object (OpenRouter's practice); OpenAI's enum has no "error".
 */
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const document = JSON.parse(
  readFileSync(new URL('../contract/schemas/openai-openapi-subset.json', import.meta.url), 'utf8'),
);
/** OpenAPI 3.0's `nullable: true` is not JSON Schema: say "or null" in JSON Schema's own words. */
function withoutNullable(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutNullable);
  if (typeof node !== 'object' || node === null) return node;
  const { nullable, ...rest } = node as Record<string, unknown>;
  const out = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, withoutNullable(v)]));
  if (nullable !== true) return out;
  if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
  if (typeof out.type === 'string') return { ...out, type: [out.type, 'null'] };
  return { anyOf: [out, { type: 'null' }] };
}
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addFormat('unixtime', {
  type: 'number',
  validate: (value: number) => Number.isInteger(value) && value >= 0,
});
ajv.addSchema(withoutNullable(document) as object, 'openai');
const schema = (name: string): ValidateFunction => {
  const validate = ajv.getSchema(`openai#/components/schemas/${name}`);
  if (!validate) throw new Error(`no schema ${name}`);
  return validate;
};
export const schemas = {
  completion: schema('CreateChatCompletionResponse'),
  chunk: schema('CreateChatCompletionStreamResponse'),
  models: schema('ListModelsResponse'),
  model: schema('Model'),
  error: schema('ErrorResponse'),
};
const insufficientCredits = ajv.compile({
  type: 'object',
  required: ['error', 'balance', 'message', 'topUpUrl'],
  additionalProperties: false,
  properties: {
    error: { type: 'string' },
    balance: { type: 'number' },
    message: { type: 'string' },
    topUpUrl: { type: 'string', format: 'uri' },
  },
});

export interface ContractLog {
  problems: string[];
  jsonBodies: number;
  chunks: number;
  errorChunks: number;
  /** Stream checks still reading their copy of the body. */
  pending: Promise<void>[];
}

function check(log: ContractLog, validate: ValidateFunction, value: unknown, what: string): void {
  if (!validate(value))
    log.problems.push(
      `${what}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(value).slice(0, 300)}`,
    );
}

/** A fetch for the SDKs under test that validates every response it hands them. */
export function validatingFetch(log: ContractLog): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const copy = response.clone();
    const contentType = response.headers.get('content-type') ?? '';
    if (!response.headers.get('x-request-id')) log.problems.push(`${url}: no x-request-id`);
    if (contentType.startsWith('text/event-stream')) {
      if (contentType !== 'text/event-stream; charset=utf-8')
        log.problems.push(`${url}: content-type ${contentType}`);
      if (response.headers.get('cache-control') !== 'no-cache')
        log.problems.push(`${url}: stream without cache-control: no-cache`);
      if (!response.headers.get('x-generation-id'))
        log.problems.push(`${url}: stream without x-generation-id`);
      log.pending.push(
        copy.text().then(
          (text) => checkStream(log, text, url),
          () => {},
        ),
      );
    } else {
      if (contentType !== 'application/json') log.problems.push(`${url}: content-type ${contentType}`);
      const body = (await copy.json().catch(() => undefined)) as Record<string, unknown> | undefined;
      log.jsonBodies += 1;
      if (response.status === 402)
        check(log, insufficientCredits, body, '402 body (the spec’s flat shape, deliberately not OpenAI’s)');
      else if (!response.ok) check(log, schemas.error, body, `${response.status} body`);
      else if (url.endsWith('/models')) check(log, schemas.models, body, 'model list');
      else if (/\/models\/[^/]+$/.test(url)) check(log, schemas.model, body, 'model');
      else {
        check(log, schemas.completion, body, 'chat completion');
        if (!response.headers.get('x-generation-id')) log.problems.push(`${url}: no x-generation-id`);
        if (typeof (body?.usage as { cost?: unknown } | undefined)?.cost !== 'number')
          log.problems.push('completion without usage.cost');
      }
    }
    return response;
  };
}

function checkStream(log: ContractLog, text: string, url: string): void {
  const payloads = text
    .split(/\r?\n\r?\n/)
    .flatMap((block) => block.split(/\r?\n/))
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice(6));
  for (const payload of payloads) {
    if (payload === '[DONE]') continue;
    const chunk = JSON.parse(payload) as { error?: unknown; choices?: { finish_reason?: unknown }[] };
    log.chunks += 1;
    if (chunk.error !== undefined) {
      // The deliberate difference: finish_reason "error" with an error object. Everything else must match.
      log.errorChunks += 1;
      const { error, ...rest } = chunk;
      if (typeof (error as { message?: unknown }).message !== 'string')
        log.problems.push(`${url}: error chunk without message`);
      check(
        log,
        schemas.chunk,
        { ...rest, choices: (rest.choices ?? []).map((c) => ({ ...c, finish_reason: 'stop' })) },
        'error chunk',
      );
    } else {
      check(log, schemas.chunk, chunk, 'stream chunk');
    }
  }
  if (payloads.at(-1) !== '[DONE]' && log.errorChunks === 0)
    log.problems.push(`${url}: stream did not end with [DONE]`);
}

export function newContractLog(): ContractLog {
  return { problems: [], jsonBodies: 0, chunks: 0, errorChunks: 0, pending: [] };
}

/** Waits for every stream check, then returns the problems found. */
export async function contractProblems(log: ContractLog): Promise<string[]> {
  await Promise.all(log.pending);
  return log.problems;
}
