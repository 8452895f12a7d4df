import { type OpenedUpstream, openWithFallback, UpstreamDeadlineError } from '../adapters/upstream.js';
import type { Bill, Billable, Delivered } from '../billing/bill.js';
import { billOnce } from '../billing/bill-once.js';
import { worstCaseBilledNano } from '../billing/holds.js';
import { promptBound } from '../billing/usage-bounds.js';
import type { Principal } from '../core/access.js';
import { GatewayTimeoutError, UpstreamError } from '../core/errors.js';
import { type ForwardedBody, toUpstreamBody } from '../core/forwarding.js';
import { newGenerationId } from '../core/ids.js';
import type { ChatRequest } from '../core/schemas.js';
import type { Hold } from '../core/store.js';
import { outputCap, type Tier, type UpstreamTarget } from '../core/tiers.js';
import { type FunctionUrlResult, jsonResponse } from '../shared/http.js';
import { logger } from '../shared/observability.js';
import { markUpstreamCall, markUpstreamOpened } from '../shared/server-timing.js';
import { admit } from './admission.js';
import type { GenerationPorts } from './config.js';
import type { Deadlines } from './deadlines.js';
import { readJsonReply } from './json-reply.js';
import { type StreamReply, streamReply } from './stream-reply.js';

/**
 * One chat completion, from the validated request to its ledger entry: it owns the request's id,
 * deadlines, hold and upstream, and each step happens here once, in order: admit (a hold where the
 * account needs one), attempt the upstream (targets, retries, fallback), deliver (a JSON reply or a
 * stream), and, whatever happens, either a settlement or the hold given back.
 */
export class Generation {
  readonly id: string;
  readonly created: number;
  private readonly tier: Tier;
  private readonly cap: number;
  private readonly bound: number;
  private readonly bodyBytes: number;
  private hold: Hold | undefined;
  /** Each target's body is built once (a retry resends it), with the extra fields it leaves out. */
  private readonly forwarded = new Map<UpstreamTarget, ForwardedBody>();

  readonly request: ChatRequest;
  readonly caller: Principal;
  readonly deadlines: Deadlines;
  private readonly requestId: string;
  private readonly afterReply: (work: Promise<void>) => void;
  private readonly gzip: boolean;

  constructor(
    start: {
      request: ChatRequest;
      bodyBytes: number;
      caller: Principal;
      deadlines: Deadlines;
      requestId: string;
      /** Runs the settlement once the reply is out, within the invocation (shared/after-reply.ts). */
      afterReply: (work: Promise<void>) => void;
      /** The client takes a gzipped reply: a stream is compressed by its relay. */
      gzip?: boolean;
    },
    private readonly ports: GenerationPorts,
  ) {
    const { request, caller, deadlines } = start;
    this.request = request;
    this.caller = caller;
    this.deadlines = deadlines;
    this.requestId = start.requestId;
    this.afterReply = start.afterReply;
    this.gzip = start.gzip === true;
    // The id names the balance slice the request was admitted on: its hold and charge go there.
    this.id = newGenerationId(deadlines.startedAt, caller.slice ?? 0);
    this.created = Math.floor(deadlines.startedAt / 1000);
    this.tier = ports.config.tiers[request.model];
    this.cap = outputCap(request, this.tier);
    this.bodyBytes = start.bodyBytes;
    this.bound = promptBound(start.bodyBytes, request.messages);
  }

  /** Admission (admission.ts): the fast path, a hold, or a refusal (402, 403; 503 if the database fails). */
  async admit(): Promise<void> {
    this.hold = await admit(
      { id: this.id, caller: this.caller, deadlines: this.deadlines, worstCaseNano: this.worstCase() },
      this.ports,
      (hold) => {
        // The hold write may have committed with only its answer lost: given back as the 503 goes out.
        this.hold = hold;
        this.afterReply(
          this.release().then((released) => {
            // The database committed what it answered too late: a sign of its latency, for the on-call.
            if (released) logger.warn('hold written after its deadline released', { holdId: hold.holdId });
          }),
        );
      },
    );
  }

  private worstCase(): bigint {
    return worstCaseBilledNano(this.bound, this.cap, this.tier.targets);
  }

  /** The upstream, tried target by target within the deadline; a failure gives the hold back. */
  async attempt(): Promise<OpenedUpstream> {
    const { config } = this.ports;
    const stream = this.request.stream === true;
    const started = this.deadlines.startedAt;
    markUpstreamCall();
    try {
      const opened = await openWithFallback({
        targets: this.tier.targets,
        bodyFor: (target) => this.forwardedTo(target).body,
        credential: this.ports.credential,
        maxBytes: config.maxResponseBytes,
        policy: stream
          ? config.retry
          : { ...config.retry, firstByteTimeoutMs: Math.max(1, this.deadlines.upstream - started) },
        deadline: this.deadlines.upstream,
        onAttemptFailed: (info) =>
          logger.warn('upstream attempt failed', {
            ...info,
            generationId: this.id,
            tier: this.request.model,
          }),
      });
      markUpstreamOpened();
      return opened;
    } catch (error) {
      await this.release();
      const atDeadline = error instanceof UpstreamDeadlineError || Date.now() >= this.deadlines.upstream;
      if (!stream && error instanceof UpstreamError && atDeadline)
        throw new GatewayTimeoutError(this.deadlines.jsonReplySeconds, { cause: error });
      throw error;
    }
  }

  /**
   * The reply, then its bill: what it delivered priced and settled (billing/bill-once.ts). A JSON
   * body goes out once billed; a stream's final chunk, once its relay has delivered (billStream).
   */
  async deliver(opened: OpenedUpstream): Promise<FunctionUrlResult> {
    const headers: Record<string, string> = { 'x-request-id': this.requestId, 'x-generation-id': this.id };
    // Extra fields this target does not take were left out: say which (core/forwarding.ts).
    const { dropped } = this.forwardedTo(opened.target);
    if (dropped.length > 0) headers['x-dropped-fields'] = dropped.join(', ').slice(0, 1_000);
    const bill = billOnce(this.billable(opened.target), {
      store: this.ports.store,
      afterReply: this.afterReply,
    });
    if (!opened.stream) {
      try {
        const json = await readJsonReply({
          body: opened.body,
          abort: opened.abort,
          envelope: { id: this.id, created: this.created, model: this.request.model },
          outputCap: this.cap,
          deadlines: this.deadlines,
        });
        return jsonResponse(200, json.reply(await bill(json.delivered)), headers);
      } catch (error) {
        // Nothing was billed.
        await this.release();
        throw error;
      }
    }
    const reply = streamReply({
      opened,
      envelope: { generationId: this.id, tier: this.request.model, created: this.created },
      config: this.ports.config,
      deadline: this.deadlines.relay,
      outputCap: this.cap,
      // The client's own choice: the upstream is asked for usage whatever it was (core/forwarding.ts).
      includeUsage: this.request.stream_options?.include_usage === true,
      gzip: this.gzip,
      headers,
    });
    void billStream(reply, bill);
    return reply.result;
  }

  private billable(target: UpstreamTarget): Billable {
    return {
      id: this.id,
      caller: this.caller,
      request: this.request,
      target,
      deadlines: this.deadlines,
      outputCap: this.cap,
      promptBound: this.bound,
      bodyBytes: this.bodyBytes,
      hold: this.hold,
    };
  }

  private forwardedTo(target: UpstreamTarget): ForwardedBody {
    let built = this.forwarded.get(target);
    if (!built) {
      built = toUpstreamBody(this.request, target);
      this.forwarded.set(target, built);
    }
    return built;
  }

  /**
   * Gives a hold back when the request ends without a bill; a failure here leaves it to the sweeper.
   * True if a hold was there and is released.
   */
  private async release(): Promise<boolean> {
    const hold = this.hold;
    if (!hold) return false;
    this.hold = undefined;
    try {
      return await this.ports.store.releaseHold(hold, { deadline: this.deadlines.settleCallBy() });
    } catch (error) {
      logger.warn('hold release failed; the sweeper will release it at expiry', {
        holdId: hold.holdId,
        error: error instanceof Error ? error : String(error),
      });
      return false;
    }
  }
}

/**
 * A stream's bill, once its relay has delivered: priced and settled, then the stream ended with its
 * usage (on the finish chunk, or on a chunk of its own for a client that asked for include_usage), or
 * with a billing error chunk if it could not be priced. Module-level, so that it
 * holds neither the generation nor its request while the stream lives.
 */
async function billStream(reply: StreamReply, bill: (delivered: Delivered) => Promise<Bill>) {
  // Undefined on a fault of the relay's own: logged, its stream ended unbilled (relay.ts).
  const delivered = await reply.delivered.catch(() => undefined);
  if (delivered) reply.finish(await bill(delivered).catch(() => undefined));
}
