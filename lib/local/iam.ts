/**
 * IAM in front of DynamoDB Local, as AWS enforces it: an HTTP proxy on a loopback port that reads each
 * call of DynamoDB's JSON protocol, names the principal from the access key id its signature carries,
 * and answers `AccessDeniedException` (HTTP 400, as DynamoDB does) unless that principal's policy, as
 * synthesized from the CDK stacks (iam-policies.ts), allows every action the call needs on every
 * resource it touches. DynamoDB Local itself checks no permission at all.
 *
 * What a call needs ("DynamoDB API permissions: Actions, resources, and conditions reference"; "Using
 * IAM with DynamoDB transactions"): the action of its own name on its table, or on
 * `table/<name>/index/<index>` for a Query or Scan of an index; BatchGetItem and BatchWriteItem their
 * own action on each table they name; a transaction has no action of its own, each of its items needs
 * the action of the operation it is (Put -> PutItem, Update -> UpdateItem, Delete -> DeleteItem,
 * ConditionCheck -> ConditionCheckItem, Get -> GetItem); the Streams API's DescribeStream,
 * GetShardIterator and GetRecords their own action on the stream's ARN (`table/<name>/stream/<label>`),
 * ListStreams on `*`. An explicit Deny wins over any Allow; nothing
 * allowed is denied.
 *
 * The operator (the admin CLI, tests' setup) signs with the access key id `local` and is not checked:
 * it stands for an administrator. Every other key must be a principal's (`credentialsOf`), or the
 * answer is DynamoDB's `UnrecognizedClientException`. Calls are forwarded with the operator's key id,
 * so that a DynamoDB Local started without -sharedDb still keeps one set of tables.
 */
import { randomUUID } from 'node:crypto';
import { Agent, createServer, type IncomingHttpHeaders, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import type { TABLES } from '../tables.js';
import type { PolicySet, Principal, ResolvedStatement } from './iam-policies.js';

const OPERATOR_KEY = 'local';
/** Marks a call this layer forwards, so that a watcher of this process's calls counts each call once. */
export const FORWARDED_HEADER = 'x-local-forwarded';
const KEY_PREFIX = 'LOCALIAM';

/** The credentials a principal signs with locally (Lambda puts a function role's in its environment). */
export function credentialsOf(principal: Principal): { accessKeyId: string; secretAccessKey: string } {
  return { accessKeyId: `${KEY_PREFIX}${principal}`, secretAccessKey: 'local' };
}

/** The environment Lambda gives a function with that role's credentials. */
export function credentialEnv(principal: Principal): Record<string, string> {
  const { accessKeyId, secretAccessKey } = credentialsOf(principal);
  return {
    AWS_ACCESS_KEY_ID: accessKeyId,
    AWS_SECRET_ACCESS_KEY: secretAccessKey,
    AWS_SESSION_TOKEN: `session-${principal}`,
  };
}

export interface Permission {
  action: string;
  resource: string;
}

/** A refusal, as AWS words it. */
export interface Denial extends Permission {
  principal: Principal;
  message: string;
}

type Body = Record<string, unknown>;
const TRANSACT_WRITE_ACTIONS: Record<string, string> = {
  Put: 'dynamodb:PutItem',
  Update: 'dynamodb:UpdateItem',
  Delete: 'dynamodb:DeleteItem',
  ConditionCheck: 'dynamodb:ConditionCheckItem',
};

/**
 * The action/resource pairs one call needs, in the order of its items. `arnOf` turns a local table
 * name into the ARN the policies name.
 */
export function requiredPermissions(
  operation: string,
  body: Body,
  arnOf: (table: string) => string,
): Permission[] {
  const needed: Permission[] = [];
  const add = (action: string, resource: string) => {
    if (!needed.some((p) => p.action === action && p.resource === resource))
      needed.push({ action, resource });
  };
  switch (operation) {
    case 'Query':
    case 'Scan': {
      const table = arnOf(String(body.TableName));
      add(`dynamodb:${operation}`, body.IndexName ? `${table}/index/${String(body.IndexName)}` : table);
      break;
    }
    case 'BatchGetItem':
    case 'BatchWriteItem':
      for (const table of Object.keys((body.RequestItems as Body | undefined) ?? {}))
        add(`dynamodb:${operation}`, arnOf(table));
      break;
    case 'TransactWriteItems':
      for (const item of (body.TransactItems as Record<string, { TableName: string }>[] | undefined) ?? []) {
        for (const [kind, action] of Object.entries(TRANSACT_WRITE_ACTIONS)) {
          const part = item[kind];
          if (part) add(action, arnOf(part.TableName));
        }
      }
      break;
    case 'TransactGetItems':
      for (const item of (body.TransactItems as { Get?: { TableName: string } }[] | undefined) ?? [])
        if (item.Get) add('dynamodb:GetItem', arnOf(item.Get.TableName));
      break;
    case 'ListTables':
      add('dynamodb:ListTables', '*');
      break;
    // The Streams API (DynamoDBStreams_20120810): its stream's ARN, named by the call or, for
    // GetRecords, by its shard iterator (DynamoDB Local's begins with it, up to a `|`).
    case 'DescribeStream':
    case 'GetShardIterator':
    case 'GetRecords': {
      const named = String(body.StreamArn ?? String(body.ShardIterator ?? '').split('|')[0]);
      const stream = /:table\/([^/]+)\/stream\/(.+)$/.exec(named);
      add(`dynamodb:${operation}`, stream ? `${arnOf(String(stream[1]))}/stream/${stream[2]}` : '*');
      break;
    }
    case 'ListStreams':
      add('dynamodb:ListStreams', '*');
      break;
    default:
      add(`dynamodb:${operation}`, body.TableName ? arnOf(String(body.TableName)) : '*');
  }
  return needed;
}

/** IAM's wildcards in an action or resource: `*` any run of characters, `?` any one. */
function matches(pattern: string, value: string, ignoreCase: boolean): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'i' : '').test(value);
}

/**
 * The request's condition keys (`ses:FromAddress`...), by lower-cased key: IAM compares condition key
 * names without regard to case, and a key the request does not carry matches no `StringEquals` or
 * `StringLike` ("IAM JSON policy elements: Condition operators").
 */
export type ConditionContext = Record<string, string>;

function conditionsHold(statement: ResolvedStatement, context: ConditionContext): boolean {
  for (const [operator, keys] of Object.entries(statement.conditions ?? {})) {
    for (const [key, values] of Object.entries(keys)) {
      const value = context[key.toLowerCase()];
      if (value === undefined) return false;
      const like = operator === 'StringLike';
      if (!values.some((v) => (like ? matches(v, value, false) : v === value))) return false;
    }
  }
  return true;
}

function covers(
  statement: ResolvedStatement,
  { action, resource }: Permission,
  context: ConditionContext,
): boolean {
  return (
    statement.actions.some((a) => matches(a, action, true)) &&
    statement.resources.some((r) => matches(r, resource, false)) &&
    conditionsHold(statement, context)
  );
}

/** The first permission the statements do not grant (an explicit Deny, or no Allow), if any. */
export function firstDenied(
  statements: readonly ResolvedStatement[],
  needed: readonly Permission[],
  context: ConditionContext = {},
): (Permission & { explicit: boolean }) | undefined {
  for (const permission of needed) {
    if (statements.some((s) => s.effect === 'Deny' && covers(s, permission, context)))
      return { ...permission, explicit: true };
    if (!statements.some((s) => s.effect === 'Allow' && covers(s, permission, context)))
      return { ...permission, explicit: false };
  }
  return undefined;
}

/** The principal a local access key id stands for, if any. */
export function principalOfKey(policies: PolicySet, accessKeyId: string): Principal | undefined {
  return (Object.keys(policies.principals) as Principal[]).find(
    (principal) => credentialsOf(principal).accessKeyId === accessKeyId,
  );
}

/**
 * Holds one call of a principal to its synthesized policy, as IAM does for every service: the
 * refusal, worded as AWS words it, or undefined when every permission is granted. The DynamoDB layer
 * below and the SES stand-in (ses.ts) both ask it.
 */
export function deniedCall(
  policies: PolicySet,
  principal: Principal,
  needed: readonly Permission[],
  context: ConditionContext = {},
): Denial | undefined {
  const policy = policies.principals[principal];
  const denied = firstDenied(policy.statements, needed, context);
  if (!denied) return undefined;
  const message =
    `User: arn:aws:sts::${policies.account}:assumed-role/${policy.role}/${principal} is not authorized to perform: ` +
    `${denied.action} on resource: ${denied.resource} because ` +
    (denied.explicit
      ? `an explicit deny in an identity-based policy denies the ${denied.action} action`
      : `no identity-based policy allows the ${denied.action} action`);
  return { principal, action: denied.action, resource: denied.resource, message };
}

export interface IamLayerOptions {
  /** Where calls go once allowed: DynamoDB Local, or the limits layer in front of it. */
  target: string;
  policies: PolicySet;
  /** The local name of each table (a test's prefixed names), which the policies know by their sandbox names. */
  tables: Record<keyof typeof TABLES, string>;
  port?: number;
  /** Told of each refusal as it is answered (npm start prints them). */
  onDenial?: (denial: Denial) => void;
}

export interface IamLayer {
  endpoint: string;
  /** Every refusal so far, for tests and for the operator's console. */
  denials(): Denial[];
  /** The refusals so far, forgotten once taken (a test that provokes one takes it). */
  takeDenials(): Denial[];
  /** Each permission a principal was allowed so far, once each (what its calls needed). */
  allowed(): (Permission & { principal: Principal })[];
  close(): Promise<void>;
}

export async function startIamLayer(options: IamLayerOptions): Promise<IamLayer> {
  const { policies } = options;
  const target = new URL(options.target);
  const deployedName = new Map<string, string>();
  for (const [id, local] of Object.entries(options.tables))
    deployedName.set(local, policies.tables[id as keyof typeof TABLES]);
  const arnOf = (table: string) =>
    `arn:aws:dynamodb:${policies.region}:${policies.account}:table/${deployedName.get(table) ?? table}`;
  const principalByKey = new Map<string, Principal>();
  for (const principal of Object.keys(policies.principals) as Principal[])
    principalByKey.set(credentialsOf(principal).accessKeyId, principal);
  const denials: Denial[] = [];
  const allowed = new Map<string, Permission & { principal: Principal }>();
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const headers = { ...req.headers };
      const credential = /Credential=([^/,\s]+)\//.exec(String(headers.authorization ?? ''));
      const keyId = credential?.[1] ?? '';
      if (keyId !== OPERATOR_KEY) {
        const principal = principalByKey.get(keyId);
        if (!principal)
          return answer(
            res,
            'UnrecognizedClientException',
            'The security token included in the request is invalid.',
          );
        const operation = String(headers['x-amz-target'] ?? '').split('.')[1] ?? '';
        let parsed: Body = {};
        try {
          parsed = JSON.parse(body.toString('utf8') || '{}') as Body;
        } catch {
          // DynamoDB answers a body it cannot read itself: forward it
        }
        const needed = requiredPermissions(operation, parsed, arnOf);
        const denial = deniedCall(policies, principal, needed);
        if (denial) {
          denials.push(denial);
          options.onDenial?.(denial);
          return answer(res, 'AccessDeniedException', denial.message);
        }
        for (const permission of needed)
          allowed.set(`${principal} ${permission.action} ${permission.resource}`, {
            principal,
            ...permission,
          });
        if (headers.authorization)
          headers.authorization = String(headers.authorization).replace(
            `Credential=${keyId}/`,
            `Credential=${OPERATOR_KEY}/`,
          );
      }
      const outgoing = request(
        {
          host: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          agent,
          headers: {
            ...headers,
            host: target.host,
            'content-length': String(body.length),
            [FORWARDED_HEADER]: 'iam',
          },
        },
        (reply) => {
          res.writeHead(reply.statusCode ?? 500, withoutHopHeaders(reply.headers));
          reply.pipe(res);
        },
      );
      outgoing.on('error', () => res.destroy());
      outgoing.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    denials: () => [...denials],
    takeDenials: () => denials.splice(0),
    allowed: () => [...allowed.values()],
    close: async () => {
      agent.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function withoutHopHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const copy = { ...headers };
  delete copy.connection;
  delete copy['keep-alive'];
  return copy;
}

/** DynamoDB's error answer: HTTP 400 and the error's type, as its JSON protocol writes it. */
function answer(res: import('node:http').ServerResponse, code: string, message: string): void {
  const body = JSON.stringify({ __type: `com.amazon.coral.service#${code}`, Message: message });
  res.writeHead(400, {
    'content-type': 'application/x-amz-json-1.0',
    'content-length': String(Buffer.byteLength(body)),
    'x-amzn-requestid': randomUUID(),
    'x-amz-crc32': String(crc32(body)),
  });
  res.end(body);
}
