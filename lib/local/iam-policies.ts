/**
 * The IAM policies the local stack enforces, read from the CDK stacks as they synthesize: the sandbox
 * stage of ApiStack with a custom domain (each function's role; the dashboard is deployed only on a
 * stack with one, lib/infra/dashboard.ts, and no other role's policy depends on it) and the CI bootstrap stack (the role the sandbox workflow's
 * contract suite runs under). Not a second list of grants: the template's own `AWS::IAM::Policy`
 * resources and roles' inline policies, their intrinsic functions resolved to concrete ARNs.
 *
 * Synthesis (without bundling the functions) takes a few seconds, so the result is kept under
 * node_modules/.cache, keyed by a hash of every source file the stacks are built from: a change to a
 * grant, a construct or a table is a new key, and the next local stack synthesizes again.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AUDIT_TABLE, DASHBOARD_TABLE, TABLES, TEAM_TABLE } from '../tables.js';

/** Who calls DynamoDB locally, each with a role of its own in AWS. */
const PRINCIPALS = [
  'completions',
  'models',
  'sweeper',
  'loggedUsage',
  'payments',
  'dashboard',
  'balanceWatch',
  'reconciler',
  'signUpGuard',
  'ciSuite',
] as const;
export type Principal = (typeof PRINCIPALS)[number];
/** The tables the policies name: the service's four, the dashboard's, the team's and the audit log. */
const TABLE_IDS = [
  ...(Object.keys(TABLES) as (keyof typeof TABLES)[]),
  DASHBOARD_TABLE.id,
  TEAM_TABLE.id,
  AUDIT_TABLE.id,
] as const;
type TableId = (typeof TABLE_IDS)[number];

/** One statement, its ARNs resolved (an ARN the resolver cannot know is `unresolved:<expression>`). */
export interface ResolvedStatement {
  effect: 'Allow' | 'Deny';
  actions: string[];
  resources: string[];
  /** `StringEquals` / `StringLike` only: operator -> condition key -> the values any of which matches. */
  conditions?: Record<string, Record<string, string[]>>;
}

interface PrincipalPolicy {
  /** The role's logical id in its template (the role name AWS would report). */
  role: string;
  statements: ResolvedStatement[];
}

export interface PolicySet {
  /** The account and region the ARNs were resolved with. */
  account: string;
  region: string;
  /** Each table's name in the synthesized sandbox stack, by table id. */
  tables: Record<TableId, string>;
  principals: Record<Principal, PrincipalPolicy>;
  /**
   * The stack's SES setup (lib/infra/email.ts), for the SES stand-in: the sender, the identity the
   * stack verifies, and that identity's default configuration set.
   */
  email: { sender: string; identity: string; configurationSet: string };
}

/** The account id and region local ARNs are written with. */
const LOCAL_ACCOUNT = '000000000000';
const LOCAL_REGION = 'local';

/** The construct ids of each principal's function (ApiStack) or role (CiBootstrapStack). */
const FUNCTION_IDS: Record<Exclude<Principal, 'ciSuite'>, string> = {
  completions: 'Completions',
  models: 'Models',
  sweeper: 'HoldSweeper',
  loggedUsage: 'LoggedUsage',
  payments: 'Payments',
  dashboard: 'DashboardFunction',
  balanceWatch: 'BalanceWatch',
  reconciler: 'PaymentsReconciler',
  signUpGuard: 'SignUpGuard',
};
/**
 * The custom domain the synthesized sandbox is given, so that it has the dashboard: a name that never
 * resolves (RFC 6761 .invalid) and a certificate ARN of the local account; neither is deployed.
 */
const SYNTH_DOMAIN = {
  domainName: 'dashboard.local.invalid',
  certificateArn: 'arn:aws:acm:us-east-1:000000000000:certificate/local',
};
const CI_ROLE_ID = 'SandboxDeploy';
/** AWS managed policies a role may carry that grant nothing on DynamoDB (logs and traces only). */
const MANAGED_WITHOUT_DYNAMODB = [/:policy\/service-role\/AWSLambdaBasicExecutionRole$/];

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** What the stacks are built from: a change here is a new cache key. */
const SOURCES = ['lib', 'functions', 'bin', 'config', 'package-lock.json', 'cdk.json'];

function sourceHash(): string {
  const hash = createHash('sha256');
  const visit = (path: string) => {
    let entries: string[];
    try {
      entries = readdirSync(path).sort();
    } catch {
      hash.update(path).update(readFileSync(path));
      return;
    }
    for (const entry of entries) visit(join(path, entry));
  };
  for (const source of SOURCES) {
    try {
      visit(join(ROOT, source));
    } catch {
      // absent (config/ in a trimmed checkout): nothing to hash
    }
  }
  return hash.digest('hex').slice(0, 16);
}

let memo: Promise<PolicySet> | undefined;

/** The policies, from the cache when the sources are unchanged, else synthesized (and cached). */
export function localPolicies(): Promise<PolicySet> {
  memo ??= (async () => {
    const dir = join(ROOT, 'node_modules/.cache/hosted-model-api');
    const file = join(dir, `iam-${sourceHash()}.json`);
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as PolicySet;
    } catch {
      const policies = await synthesizePolicies();
      mkdirSync(dir, { recursive: true });
      // Written whole then renamed: test files starting at once never read half a file.
      const temporary = `${file}.${process.pid}.tmp`;
      writeFileSync(temporary, JSON.stringify(policies));
      renameSync(temporary, file);
      // Older syntheses are of sources that changed since: dropped.
      for (const old of readdirSync(dir))
        if (/^iam-[0-9a-f]+\.json$/.test(old) && join(dir, old) !== file)
          rmSync(join(dir, old), { force: true });
      return policies;
    }
  })();
  return memo;
}

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

/**
 * Synthesizes both stacks (no bundling) and reads each principal's statements from the templates;
 * `context` adds CDK context values (a test's `sesSandboxRecipients`), never cached.
 */
export async function synthesizePolicies(context: Record<string, string> = {}): Promise<PolicySet> {
  // Loaded only here: aws-cdk-lib is large, and only a synthesis needs it.
  const { App, Stack } = await import('aws-cdk-lib');
  const { ApiStack } = await import('../infra/api-stack.js');
  const { CiBootstrapStack } = await import('../infra/ci-bootstrap-stack.js');
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [], ...context } });
  // The names bin/app.ts gives them: the sandbox's table names derive from its stack name.
  const api = new ApiStack(app, 'HostedModelApi-sandbox', { stage: 'sandbox', ...SYNTH_DOMAIN });
  const ci = new CiBootstrapStack(app, 'HostedModelApi-ci', { repository: 'owner/name' });
  const assembly = app.synth();
  const templateOf = (stack: InstanceType<typeof Stack>) =>
    assembly.getStackArtifact(stack.artifactId).template as Template;
  const apiTemplate = templateOf(api);
  const ciTemplate = templateOf(ci);

  const roleLogicalId = (stack: InstanceType<typeof Stack>, path: string[]): string => {
    let node = stack.node.findChild(path[0] as string);
    for (const id of path.slice(1)) node = node.node.findChild(id);
    const role = (node as unknown as { role?: { node: { defaultChild?: unknown } } }).role;
    const child = (role?.node.defaultChild ?? node.node.defaultChild) as Parameters<
      typeof stack.getLogicalId
    >[0];
    return stack.getLogicalId(child);
  };

  const tables = {} as Record<TableId, string>;
  for (const id of TABLE_IDS) {
    const table = Object.values(apiTemplate.Resources).find(
      (r) =>
        r.Type === 'AWS::DynamoDB::GlobalTable' && String(r.Properties?.TableName ?? '').endsWith(`-${id}`),
    );
    if (!table) throw new Error(`the sandbox template has no ${id} table with a fixed name`);
    tables[id] = String(table.Properties?.TableName);
  }

  const principals = {} as Record<Principal, PrincipalPolicy>;
  for (const [principal, id] of Object.entries(FUNCTION_IDS) as [Principal, string][]) {
    const role = roleLogicalId(api, [id, 'Function']);
    principals[principal] = { role, statements: statementsOf(apiTemplate, role) };
  }
  const ciRole = roleLogicalId(ci, [CI_ROLE_ID]);
  principals.ciSuite = { role: ciRole, statements: statementsOf(ciTemplate, ciRole) };
  return { account: LOCAL_ACCOUNT, region: LOCAL_REGION, tables, principals, email: emailOf(apiTemplate) };
}

/** The SES identity, its default configuration set and the sender (the user pool's From), as synthesized. */
function emailOf(template: Template): PolicySet['email'] {
  const all = Object.values(template.Resources);
  const identity = all.find((r) => r.Type === 'AWS::SES::EmailIdentity')?.Properties;
  const pool = all.find((r) => r.Type === 'AWS::Cognito::UserPool')?.Properties;
  const setRef = (
    identity?.ConfigurationSetAttributes as { ConfigurationSetName?: { Ref?: string } } | undefined
  )?.ConfigurationSetName?.Ref;
  const set = setRef ? template.Resources[setRef]?.Properties?.Name : undefined;
  const sender = (pool?.EmailConfiguration as { From?: unknown } | undefined)?.From;
  if (typeof identity?.EmailIdentity !== 'string' || typeof set !== 'string' || typeof sender !== 'string')
    throw new Error('the sandbox template has no SES identity with a default configuration set and a sender');
  return { sender, identity: identity.EmailIdentity, configurationSet: set };
}

/** Every statement the template attaches to the role: its inline policies and the AWS::IAM::Policy resources naming it. */
function statementsOf(template: Template, role: string): ResolvedStatement[] {
  const roleResource = template.Resources[role];
  if (roleResource?.Type !== 'AWS::IAM::Role') throw new Error(`${role} is not a role in its template`);
  const documents: unknown[] = [];
  for (const policy of (roleResource.Properties?.Policies as { PolicyDocument: unknown }[] | undefined) ?? [])
    documents.push(policy.PolicyDocument);
  for (const arn of (roleResource.Properties?.ManagedPolicyArns as unknown[] | undefined) ?? []) {
    const resolved = resolve(template, arn);
    if (!MANAGED_WITHOUT_DYNAMODB.some((pattern) => pattern.test(resolved)))
      throw new Error(
        `${role} carries the managed policy ${resolved}, which the local IAM check cannot read`,
      );
  }
  for (const resource of Object.values(template.Resources)) {
    if (resource.Type !== 'AWS::IAM::Policy') continue;
    const roles = (resource.Properties?.Roles as { Ref?: string }[] | undefined) ?? [];
    if (roles.some((r) => r.Ref === role)) documents.push(resource.Properties?.PolicyDocument);
  }
  const statements: ResolvedStatement[] = [];
  for (const document of documents) {
    for (const statement of (document as { Statement: Record<string, unknown>[] }).Statement) {
      // Conditions are evaluated (iam.ts) when they are string comparisons (SES's send, conditioned
      // on the From address); any other operator, NotAction or NotResource is refused here.
      const conditions = conditionsOf(statement.Condition);
      if (statement.NotAction || statement.NotResource || conditions === 'unsupported')
        throw new Error(
          `${role} has a statement the local IAM check does not evaluate (NotAction, NotResource or a Condition other than StringEquals/StringLike): ${JSON.stringify(statement)}`,
        );
      statements.push({
        effect: statement.Effect === 'Deny' ? 'Deny' : 'Allow',
        actions: listOf(statement.Action).map(String),
        resources: listOf(statement.Resource).map((r) => resolve(template, r)),
        ...(conditions ? { conditions } : {}),
      });
    }
  }
  return statements;
}

function conditionsOf(
  condition: unknown,
): Record<string, Record<string, string[]>> | undefined | 'unsupported' {
  if (condition === undefined) return undefined;
  const result: Record<string, Record<string, string[]>> = {};
  for (const [operator, keys] of Object.entries(condition as Record<string, Record<string, unknown>>)) {
    if (operator !== 'StringEquals' && operator !== 'StringLike') return 'unsupported';
    result[operator] = {};
    for (const [key, values] of Object.entries(keys)) {
      const strings = listOf(values);
      if (!strings.every((v) => typeof v === 'string')) return 'unsupported';
      (result[operator] as Record<string, string[]>)[key] = strings as string[];
    }
  }
  return result;
}

const listOf = (value: unknown): unknown[] =>
  Array.isArray(value) ? value : value === undefined ? [] : [value];

const PSEUDO: Record<string, string> = {
  'AWS::Partition': 'aws',
  'AWS::Region': LOCAL_REGION,
  'AWS::AccountId': LOCAL_ACCOUNT,
  'AWS::URLSuffix': 'amazonaws.com',
};

/** A policy's resource expression as a string: pseudo parameters, tables' Ref and Arn, Fn::Join. */
function resolve(template: Template, value: unknown): string {
  if (typeof value === 'string') return value;
  const expression = value as Record<string, unknown>;
  if (typeof expression.Ref === 'string') {
    const pseudo = PSEUDO[expression.Ref];
    if (pseudo) return pseudo;
    const table = tableName(template, expression.Ref);
    if (table) return table;
  }
  const getAtt = expression['Fn::GetAtt'] as [string, string] | undefined;
  if (getAtt && getAtt[1] === 'Arn') {
    const table = tableName(template, getAtt[0]);
    if (table) return `arn:aws:dynamodb:${LOCAL_REGION}:${LOCAL_ACCOUNT}:table/${table}`;
  }
  const join = expression['Fn::Join'] as [string, unknown[]] | undefined;
  if (join) return join[1].map((part) => resolve(template, part)).join(join[0]);
  // A secret, a queue, a log group: not a DynamoDB resource, and never matched by one.
  return `unresolved:${JSON.stringify(value)}`;
}

function tableName(template: Template, logicalId: string): string | undefined {
  const resource = template.Resources[logicalId];
  if (resource?.Type !== 'AWS::DynamoDB::GlobalTable' && resource?.Type !== 'AWS::DynamoDB::Table')
    return undefined;
  const name = resource.Properties?.TableName;
  if (typeof name !== 'string')
    throw new Error(`table ${logicalId} has no fixed name in the sandbox template`);
  return name;
}
