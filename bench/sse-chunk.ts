/** A relayed chunk's SSE line as a client gets it (about 250 bytes), the `i`th word its content: the gzip benches' sample. */
export const sseChunk = (i: number) =>
  `data: ${JSON.stringify({
    id: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
    object: 'chat.completion.chunk',
    created: 1_767_225_600,
    model: 'svc-fast',
    system_fingerprint: 'fp_simulator',
    choices: [
      { index: 0, delta: { content: ` word${(i * 7919) % 1000}` }, logprobs: null, finish_reason: null },
    ],
  })}\n\n`;
