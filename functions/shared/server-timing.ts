/**
 * For the added time to first byte bench (bench/added-ttfb.ts) only: with SERVER_TIMING=on in a
 * function's environment, each reply carries a `server-timing` header splitting the invocation's time
 * before its first byte into `pre` (handler entry to the upstream call), `upstream` (the call to its
 * first event, or to its whole JSON reply's headers) and `post` (from there to the reply handed to the
 * runtime), with the CPU time before the upstream call (`precpu`) and between the last reply handed
 * over and this invocation's start (`betweencpu`: the last settlement, the runtime client's work). Off (the default, and as deployed), each mark is one test of a constant and the header is
 * never set. An instance runs one invocation at a time, so the marks are module state.
 */
const ON = process.env.SERVER_TIMING === 'on';

const marks = { start: 0, upstream: 0, opened: 0, startCpu: 0, upstreamCpu: 0, replyCpu: 0, betweenCpu: 0 };
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

export function markInvocation(): void {
  if (!ON) return;
  marks.start = performance.now();
  marks.startCpu = cpuMs();
  marks.betweenCpu = marks.replyCpu ? marks.startCpu - marks.replyCpu : 0;
}

export function markUpstreamCall(): void {
  if (!ON) return;
  marks.upstream = performance.now();
  marks.upstreamCpu = cpuMs();
}

export function markUpstreamOpened(): void {
  if (ON) marks.opened = performance.now();
}

/** The header, added to a reply about to go out; nothing when off or when no upstream call was made. */
export function withServerTiming(headers: Record<string, string>): Record<string, string> {
  if (!ON || marks.upstream === 0) return headers;
  const now = performance.now();
  const { start, upstream, opened } = marks;
  marks.upstream = 0;
  marks.opened = 0;
  const pre = upstream - start;
  const up = (opened || now) - upstream;
  const post = opened ? now - opened : 0;
  marks.replyCpu = cpuMs();
  const cpu = `precpu;dur=${(marks.upstreamCpu - marks.startCpu).toFixed(3)}, betweencpu;dur=${marks.betweenCpu.toFixed(3)}`;
  return {
    ...headers,
    'server-timing': `pre;dur=${pre.toFixed(3)}, upstream;dur=${up.toFixed(3)}, post;dur=${post.toFixed(3)}, ${cpu}`,
  };
}
