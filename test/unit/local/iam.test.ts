import { describe, expect, it } from 'vitest';
import { firstDenied, requiredPermissions } from '../../../lib/local/iam.js';
import type { ResolvedStatement } from '../../../lib/local/iam-policies.js';

/**
 * What the local IAM layer asks of a principal's policy for each DynamoDB call, and how it decides, as
 * AWS documents it: a transaction has no action of its own (each item needs its operation's), an
 * index is a resource of its own, an explicit Deny wins, nothing allowed is denied.
 */
const arn = (table: string) => `arn:aws:dynamodb:local:000000000000:table/${table}`;

describe('requiredPermissions', () => {
  it('asks each item of a TransactWriteItems for its own action, and nothing for the transaction', () => {
    const needed = requiredPermissions(
      'TransactWriteItems',
      {
        TransactItems: [
          { ConditionCheck: { TableName: 'ledger', Key: {} } },
          { Update: { TableName: 'holds', Key: {} } },
          { Put: { TableName: 'ledger', Item: {} } },
          { Delete: { TableName: 'holds', Key: {} } },
          { Put: { TableName: 'ledger', Item: {} } },
        ],
      },
      arn,
    );
    expect(needed).toEqual([
      { action: 'dynamodb:ConditionCheckItem', resource: arn('ledger') },
      { action: 'dynamodb:UpdateItem', resource: arn('holds') },
      { action: 'dynamodb:PutItem', resource: arn('ledger') },
      { action: 'dynamodb:DeleteItem', resource: arn('holds') },
    ]);
  });

  it('asks GetItem of each item of a TransactGetItems', () => {
    expect(
      requiredPermissions(
        'TransactGetItems',
        { TransactItems: [{ Get: { TableName: 'accounts' } }, { Get: { TableName: 'keys' } }] },
        arn,
      ),
    ).toEqual([
      { action: 'dynamodb:GetItem', resource: arn('accounts') },
      { action: 'dynamodb:GetItem', resource: arn('keys') },
    ]);
  });

  it('names an index as its own resource, and each table of a batch', () => {
    expect(requiredPermissions('Query', { TableName: 'keys', IndexName: 'byAccount' }, arn)).toEqual([
      { action: 'dynamodb:Query', resource: `${arn('keys')}/index/byAccount` },
    ]);
    expect(
      requiredPermissions('BatchGetItem', { RequestItems: { keys: {}, accounts: {} } }, arn).map(
        (p) => p.resource,
      ),
    ).toEqual([arn('keys'), arn('accounts')]);
  });
});

describe('firstDenied', () => {
  const allow = (actions: string[], resources: string[]): ResolvedStatement => ({
    effect: 'Allow',
    actions,
    resources,
  });

  it('denies what no statement allows, and names it', () => {
    const statements = [allow(['dynamodb:PutItem', 'dynamodb:DeleteItem'], [arn('holds')])];
    expect(
      firstDenied(statements, [
        { action: 'dynamodb:PutItem', resource: arn('holds') },
        { action: 'dynamodb:UpdateItem', resource: arn('holds') },
      ]),
    ).toEqual({ action: 'dynamodb:UpdateItem', resource: arn('holds'), explicit: false });
  });

  it('reads wildcards in actions (any case) and resources, and never lets a table grant its index', () => {
    const statements = [allow(['DynamoDB:Get*'], [`${arn('keys')}/index/*`, arn('accounts')])];
    expect(
      firstDenied(statements, [{ action: 'dynamodb:GetItem', resource: arn('accounts') }]),
    ).toBeUndefined();
    expect(
      firstDenied(statements, [{ action: 'dynamodb:GetItem', resource: `${arn('keys')}/index/byAccount` }]),
    ).toBeUndefined();
    expect(
      firstDenied(
        [allow(['dynamodb:Query'], [arn('keys')])],
        [{ action: 'dynamodb:Query', resource: `${arn('keys')}/index/byAccount` }],
      ),
    ).toMatchObject({ explicit: false });
  });

  it('lets an explicit Deny win over an Allow', () => {
    const statements: ResolvedStatement[] = [
      allow(['dynamodb:*'], ['*']),
      { effect: 'Deny', actions: ['dynamodb:DeleteItem'], resources: [arn('ledger')] },
    ];
    expect(firstDenied(statements, [{ action: 'dynamodb:DeleteItem', resource: arn('ledger') }])).toEqual({
      action: 'dynamodb:DeleteItem',
      resource: arn('ledger'),
      explicit: true,
    });
  });
});

describe('conditions (SES send, StringEquals on ses:FromAddress)', () => {
  const identity = 'arn:aws:ses:local:000000000000:identity/example.com';
  const statements: ResolvedStatement[] = [
    {
      effect: 'Allow',
      actions: ['ses:SendEmail'],
      resources: [identity],
      conditions: { StringEquals: { 'ses:FromAddress': ['no-reply@example.com'] } },
    },
  ];
  const needed = [{ action: 'ses:SendEmail', resource: identity }];

  it('allows a request whose condition key matches (key names compared without case)', () => {
    expect(firstDenied(statements, needed, { 'ses:fromaddress': 'no-reply@example.com' })).toBeUndefined();
  });

  it('denies another From address, and a request without the key', () => {
    expect(firstDenied(statements, needed, { 'ses:fromaddress': 'ceo@example.com' })).toMatchObject({
      explicit: false,
    });
    expect(firstDenied(statements, needed)).toMatchObject({ explicit: false });
  });
});
