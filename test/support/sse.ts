/** Reads a whole SSE response: the data payloads in order, the comment lines, and whether it broke. */
export async function readSse(
  response: Response,
): Promise<{ data: string[]; comments: string[]; raw: string; broken: boolean }> {
  let raw = '';
  let broken = false;
  try {
    raw = await response.text();
  } catch {
    broken = true;
  }
  const data: string[] = [];
  const comments: string[] = [];
  for (const block of raw.split(/\r?\n\r?\n/)) {
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('data: ')) data.push(line.slice(6));
      else if (line.startsWith(':')) comments.push(line);
    }
  }
  return { data, comments, raw, broken };
}

/** Polls until `check` returns a value, or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
