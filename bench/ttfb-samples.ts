/**
 * bench/added-ttfb.ts's client and figures: one request timed to its first byte (a JSON reply) or
 * first content chunk (a stream), with the function's `server-timing` split, and a round's figures of
 * one cell (its systems' samples).
 */
import { Agent, request } from 'node:http';
import { createGunzip } from 'node:zlib';

export type System = 'direct' | 'service' | 'portkey';

export interface Sample {
  status: number;
  ttfb: number;
  total: number;
  bytes: number;
  pre?: number;
  post?: number;
  preCpu?: number;
  betweenCpu?: number;
  completionTokens: number;
  promptTokens: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const CONTENT = /"content":"[^"]/;

/** One request: its first byte (JSON) or first content chunk (stream), end, bytes, server-timing. */
export function timed(url: string, body: string, headers: Record<string, string>): Promise<Sample> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate', ...headers },
      },
      (res) => {
        const stream = String(res.headers['content-type']).startsWith('text/event-stream');
        let ttfb = Number.NaN;
        let bytes = 0;
        let text = '';
        res.on('data', (part: Buffer) => {
          bytes += part.byteLength;
          if (!stream && Number.isNaN(ttfb)) ttfb = performance.now() - started;
        });
        const decoded = res.headers['content-encoding'] === 'gzip' ? res.pipe(createGunzip()) : res;
        decoded.setEncoding('utf8');
        decoded.on('data', (part: string) => {
          text += part;
          if (stream && Number.isNaN(ttfb) && CONTENT.test(text)) ttfb = performance.now() - started;
        });
        decoded.on('error', reject);
        decoded.on('end', () => {
          const timing = String(res.headers['server-timing'] ?? '');
          const dur = (name: string) => Number(new RegExp(`${name};dur=([\\d.]+)`).exec(timing)?.[1]);
          const usage = /"prompt_tokens":(\d+),"completion_tokens":(\d+)/.exec(text);
          resolve({
            status: res.statusCode ?? 0,
            ttfb,
            total: performance.now() - started,
            bytes,
            ...(timing
              ? { pre: dur('pre'), post: dur('post'), preCpu: dur('precpu'), betweenCpu: dur('betweencpu') }
              : {}),
            promptTokens: Number(usage?.[1] ?? 0),
            completionTokens: Number(usage?.[2] ?? 0),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export const chat = (stream: boolean, directives: string, prompt = 'Say hello.') =>
  JSON.stringify({
    model: 'svc-fast',
    messages: [{ role: 'user', content: `${prompt} [[sim:tokens=16]]${directives}` }],
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });

const sorted = (values: number[]) => values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
export const pct = (values: number[], p: number) => {
  const s = sorted(values);
  return s[Math.min(s.length - 1, Math.ceil((s.length * p) / 100) - 1)] ?? Number.NaN;
};
export const median = (values: number[]) => pct(values, 50);
export const spread = (values: number[]) =>
  `${median(values).toFixed(1)} (${Math.min(...values).toFixed(1)}-${Math.max(...values).toFixed(1)})`;

/** Per cell (size, kind, account, clients), per round: that round's figures. */
export interface CellRound {
  added50: number;
  added99: number;
  portkey50?: number;
  portkey99?: number;
  pre50: number;
  pre99: number;
  post50: number;
  post99: number;
  preCpu50: number;
  betweenCpu50: number;
  errors: number;
}
export function roundOf(samples: Record<System, Sample[]>): CellRound {
  const ok = (s: Sample[]) => s.filter((x) => x.status === 200);
  const t = (s: Sample[]) => ok(s).map((x) => x.ttfb);
  const direct = t(samples.direct);
  const service = ok(samples.service);
  const round: CellRound = {
    added50: median(t(samples.service)) - median(direct),
    added99: pct(t(samples.service), 99) - pct(direct, 99),
    pre50: median(service.map((s) => s.pre ?? Number.NaN)),
    pre99: pct(
      service.map((s) => s.pre ?? Number.NaN),
      99,
    ),
    post50: median(service.map((s) => s.post ?? Number.NaN)),
    post99: pct(
      service.map((s) => s.post ?? Number.NaN),
      99,
    ),
    preCpu50: median(service.map((s) => s.preCpu ?? Number.NaN)),
    betweenCpu50: median(service.map((s) => s.betweenCpu ?? Number.NaN)),
    errors: Object.values(samples).reduce((n, s) => n + s.length - ok(s).length, 0),
  };
  if (samples.portkey.length > 0) {
    round.portkey50 = median(t(samples.portkey)) - median(direct);
    round.portkey99 = pct(t(samples.portkey), 99) - pct(direct, 99);
  }
  return round;
}

/** Closes the client's kept-alive connections. */
export const closeClient = () => agent.destroy();
