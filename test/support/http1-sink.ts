import type { Http1BodySink, Http1StreamHead } from '../../functions/adapters/http1.js';

/**
 * A streamed answer's sink (functions/adapters/http1.ts `open`) that records what it heard, in order:
 * `heard` as text (each piece, then `(end)` or `(<failure kind>)`), `pieces` as the bytes, `events` as
 * what each call was (`piece`, `end`, `fail:<kind>`); `outcome` resolves at the end or the failure.
 */
export function recorder(onPiece?: (piece: string, head: Http1StreamHead) => void) {
  const heard: string[] = [];
  const pieces: Buffer[] = [];
  const events: string[] = [];
  let head: Http1StreamHead | undefined;
  let finished: (outcome: string) => void = () => {};
  const outcome = new Promise<string>((resolve) => {
    finished = resolve;
  });
  const sinkFor = (opened: Http1StreamHead): Http1BodySink => {
    head = opened;
    return {
      piece: (bytes) => {
        events.push('piece');
        pieces.push(Buffer.from(bytes));
        heard.push(bytes.toString());
        onPiece?.(bytes.toString(), opened);
      },
      end: () => {
        events.push('end');
        heard.push('(end)');
        finished('end');
      },
      fail: (error) => {
        events.push(`fail:${error.kind}`);
        heard.push(`(${error.kind})`);
        finished(error.kind);
      },
    };
  };
  return { heard, pieces, events, sinkFor, outcome, head: () => head as Http1StreamHead };
}
