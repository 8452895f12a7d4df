/**
 * What a stream's relay (relay.ts) is given, and what it gives back: the upstream's events, the
 * generation's envelope, its limits in time and size and the compressor; the client's stream, what
 * was delivered once the upstream is done, and the end that writes the billed usage.
 */
import type { Readable } from 'node:stream';
import type { UpstreamEvents } from '../adapters/upstream-events.js';
import type { ClientUsage, UsageReport } from '../core/usage.js';

/** A relay under way (relay.ts). */
export interface Relay {
  /** The client's stream (compressed if asked). */
  body: Readable;
  /**
   * Resolves once the upstream is done and stopped, everything but the final chunks written (the
   * finish chunk held back for the usage, and a cut's length chunk, are `finish`'s); keep-alives go
   * on until `finish`. Rejects only on a fault of the relay's
   * own, logged, its stream then ended.
   */
  delivered: Promise<RelayOutcome>;
  /**
   * Ends the stream once delivered: the final chunk with the billed usage (on an error chunk if the
   * upstream failed; on a chunk with no choices if the client asked for include_usage; else on the
   * finish chunk), or with none (the generation could not be priced) a billing error chunk; then
   * `[DONE]`.
   */
  finish(usage: ClientUsage | undefined): void;
}

export interface RelayOutcome {
  /** The upstream's last usage report, if it sent one. */
  usage: UsageReport | undefined;
  /**
   * Everything delivered to the client as content, refusal, reasoning or tool-call text: exactly what
   * is billed (an event that was not delivered is not in it) and the basis of an estimate.
   */
  deliveredText: string;
  /** Set when the upstream failed after the first byte. */
  failure: string | undefined;
  /** Set when the relay ended the generation itself: the output cap or the deadline was reached. */
  cut: 'output_cap' | 'deadline' | undefined;
  /** The last finish_reason the upstream gave (of the first choice). */
  finishReason: string | undefined;
}

export interface RelayOptions {
  /** The upstream's events, parsed (adapters/upstream-events.ts). */
  events: Pick<UpstreamEvents, 'next' | 'cancel'>;
  generationId: string;
  tier: string;
  created: number;
  keepAliveMs: number;
  idleTimeoutMs: number;
  /** Epoch ms by which the relay stops reading and delivers what it has. */
  deadline?: number;
  /** The request's output cap in tokens: a completion clearly beyond it is cut. */
  outputCap?: number;
  /**
   * The client asked for `stream_options.include_usage` (the upstream is always asked, whatever the
   * client said): OpenAI's shape, `"usage": null` on every chunk and a last chunk with no choices
   * carrying the usage. Otherwise the usage rides on the last finish chunk.
   */
  includeUsage?: boolean;
  /**
   * Compresses what the relay writes, write by write, when the client takes a compressed reply
   * (shared/compression.ts `SyncGzip`): the relay's own stream carries the compressed bytes, one
   * stream layer fewer than a compressing stream piped after it.
   */
  compress?: Compressor;
  abortUpstream: () => void;
}

/** Compresses each write as a whole (nothing held back), and ends the compressed stream. */
export interface Compressor {
  write(text: string): Buffer;
  end(): Buffer;
  /** Done with the compressor without ending its stream (freed, or reset and kept for the next). */
  close(): void;
}
