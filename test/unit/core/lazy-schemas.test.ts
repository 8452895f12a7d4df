import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * The request and reply schemas are built on first use, not at import: an instance's init does not
 * pay for them. The request's known fields are spelled out so that nothing builds the schema to read
 * them; they must stay equal to the schema's.
 */
afterEach(() => {
  vi.doUnmock('zod');
  vi.resetModules();
});

/** The two modules imported afresh over a zod whose object builders count their calls. */
async function freshModules() {
  vi.resetModules();
  const built = { count: 0 };
  vi.doMock('zod', async (importOriginal) => {
    const zod = await importOriginal<typeof import('zod')>();
    const counted =
      <F extends (...args: never[]) => unknown>(build: F) =>
      (...args: Parameters<F>) => {
        built.count += 1;
        return build(...args);
      };
    return { ...zod, object: counted(zod.object), looseObject: counted(zod.looseObject) };
  });
  const schemas = await import('../../../functions/core/schemas.js');
  const reply = await import('../../../functions/core/upstream-reply.js');
  return { built, schemas, reply };
}

const chunk = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: { content: 'hi', ...extra }, finish_reason: null }],
  });

describe('schemas built on first use', () => {
  it('builds none at import; the first request builds the request schema, the first chunk the reply schemas', async () => {
    const { built, schemas, reply } = await freshModules();
    expect(built.count).toBe(0);
    schemas.parseChatRequest(
      JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] }),
    );
    const afterRequestSchema = built.count;
    expect(afterRequestSchema).toBeGreaterThan(0);
    schemas.parseChatRequest(
      JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'again' }] }),
    );
    expect(built.count).toBe(afterRequestSchema);
    expect(reply.parseChunkData(chunk())).toMatchObject({ kind: 'chunk' });
    const afterReplySchemas = built.count;
    expect(afterReplySchemas).toBeGreaterThan(afterRequestSchema);
    expect(reply.parseChunkData(chunk({ tool_calls: [{ index: 0, id: 't' }] }))).toMatchObject({
      kind: 'chunk',
    });
    expect(built.count).toBe(afterReplySchemas);
  });

  it("keeps the request's known fields equal to the request schema's, in its order", async () => {
    const { KNOWN_REQUEST_FIELDS, requestSchemaFields } = await import('../../../functions/core/schemas.js');
    expect([...KNOWN_REQUEST_FIELDS]).toEqual(requestSchemaFields());
  });
});
