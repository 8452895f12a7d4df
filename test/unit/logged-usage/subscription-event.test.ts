import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readUsageLines } from '../../../functions/billing/usage-lines.js';
import { decodeLogsEvent } from '../../../functions/logged-usage/subscription-event.js';
import { subscriptionEvent } from '../../support/logs-subscription.js';
import { TEST_CHECKS } from '../../support/usage-lines.js';

/**
 * The subscription event as CloudWatch Logs sends it (gzip, then base64, under awslogs.data): a
 * control message carries nothing, a data message its events; the usage records in a batch that
 * mixes usage lines, other lines and a garbled record are read, the garbled one counted.
 */
const RECORD = {
  accountId: 'acct-1',
  generationId: 'gen-1700000000-ABCDEFGHIJKLMNOPQRSTUVWX',
  keyId: 'key-1',
  tier: 'svc-fast',
  upstreamModel: 'm',
  promptTokens: 12,
  completionTokens: 10,
  cachedTokens: 0,
  upstreamCostUsd: '0.0001',
  billedNano: '130000',
  estimated: false,
  createdAt: '2025-01-01T00:00:00.000Z',
};

const usageLine = (record: unknown) =>
  JSON.stringify({ level: 'INFO', message: 'generation usage', record, billedUsd: 0.00013 });

describe('decodeLogsEvent', () => {
  it('reads a data message: its log group, stream and events, each with id, timestamp and message', () => {
    const batch = decodeLogsEvent(
      subscriptionEvent([{ message: usageLine(RECORD), timestamp: 1_700_000_000_000 }]),
    );
    expect(batch.logGroup).toBe('/aws/lambda/Completions');
    expect(batch.logEvents).toEqual([
      { id: expect.stringMatching(/^\d{56}$/), timestamp: 1_700_000_000_000, message: usageLine(RECORD) },
    ]);
  });

  it('gives no events for a control message (AWS checking the destination)', () => {
    expect(decodeLogsEvent(subscriptionEvent([], 'CONTROL_MESSAGE')).logEvents).toEqual([]);
    // Even should one carry text, it is not log data.
    expect(
      decodeLogsEvent(subscriptionEvent([{ message: usageLine(RECORD) }], 'CONTROL_MESSAGE')).logEvents,
    ).toEqual([]);
  });

  it('throws on what is not a subscription event (its retry, then the dead-letter queue, keep it)', () => {
    expect(() => decodeLogsEvent({ awslogs: { data: 'bm90IGd6aXA=' } })).toThrow();
    expect(() => decodeLogsEvent({} as never)).toThrow(/awslogs\.data/);
    const other = gzipSync(JSON.stringify({ messageType: 'SOMETHING_ELSE', logEvents: [] })).toString(
      'base64',
    );
    expect(() => decodeLogsEvent({ awslogs: { data: other } })).toThrow(/data message/);
  });

  it('refuses a payload that inflates past what CloudWatch Logs ever sends, before holding it', () => {
    // 64 MiB of one character gzips to about 64 KB: a bomb, not a batch of log events.
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x61)).toString('base64');
    expect(() => decodeLogsEvent({ awslogs: { data: bomb } })).toThrow(/larger than/);
  });

  it('reads the records of a batch mixing usage lines, other lines and a garbled record', () => {
    const second = { ...RECORD, generationId: 'gen-1700000001-ZYXWVUTSRQPONMLKJIHGFEDC' };
    const batch = decodeLogsEvent(
      subscriptionEvent([
        { message: usageLine(RECORD) },
        { message: JSON.stringify({ level: 'WARN', message: 'settlement deferred to the sweeper' }) },
        { message: 'START RequestId: 5e1f Version: $LATEST' },
        // A usage line whose record fails the checks (billedNano not a whole number) ...
        { message: usageLine({ ...RECORD, generationId: 'gen-1-X', billedNano: '1.5' }) },
        // ... and one cut short.
        { message: usageLine(second).slice(0, 80) },
        // With Lambda's plain text prefix.
        { message: `2025-01-01T00:00:00.000Z\t5e1f\tINFO\t${usageLine(second)}` },
        // The same generation twice is one record.
        { message: usageLine(RECORD) },
      ]),
    );
    const { records, unreadable } = readUsageLines(batch.logEvents, TEST_CHECKS);
    expect(records.map((r) => r.entry.generationId)).toEqual([RECORD.generationId, second.generationId]);
    expect(records[0]?.entry.billedNano).toBe(130_000n);
    expect(records[0]?.hold).toBeUndefined();
    expect(unreadable).toHaveLength(2);
  });
});
