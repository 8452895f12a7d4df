/**
 * Where the direct DynamoDB calls (wire.ts) go and as whom they sign: in a function, from the
 * environment Lambda sets (AWS_REGION; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN:
 * the function role's credentials) or the local stack's (DYNAMODB_ENDPOINT), without an SDK client,
 * so the function bundles carry none of the SDK's runtime; elsewhere (the operator's CLI, the local
 * stack, tests), from the SDK client they hand the store, with its whole provider chain and its clock.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

export interface WireCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

interface WireEndpoint {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number | undefined;
  path: string;
}

export interface WireConnection {
  region(): Promise<string>;
  /** Asked before each signature (a provider keeps what it may keep). */
  credentials(): Promise<WireCredentials>;
  endpoint(): Promise<WireEndpoint>;
  /** Milliseconds added to this clock to sign, corrected from DynamoDB's answers (wire.ts). */
  clockOffset: number;
}

/** A URL's parts as the wire takes them: `http://127.0.0.1:8000` and the like. */
function endpointOfUrl(url: URL): WireEndpoint {
  return {
    protocol: url.protocol === 'http:' ? 'http:' : 'https:',
    hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : undefined,
    path: url.pathname || '/',
  };
}

/** The regional endpoint, as the SDK's endpoint rules name it for the commercial, China and GovCloud partitions. */
export function regionalHost(service: string, region: string, env: NodeJS.ProcessEnv = process.env): string {
  const fips = env.AWS_USE_FIPS_ENDPOINT === 'true' ? '-fips' : '';
  const domain = region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com';
  return `${service}${fips}.${region}.${domain}`;
}

/**
 * The function's connection: DYNAMODB_ENDPOINT (the local stack's DynamoDB, signed with the role
 * credentials the local emulator puts in the environment as Lambda does, or `local`) or the region's
 * endpoint, signed with the environment's credentials (the SDK's `fromEnv`, which the bundles had as
 * their whole provider chain: lambda-credentials.ts), read once: Lambda sets them for the instance's life.
 */
export function connectionFromEnv(env: NodeJS.ProcessEnv = process.env): WireConnection {
  const local = env.DYNAMODB_ENDPOINT;
  const region = env.AWS_REGION ?? (local ? 'local' : undefined);
  let credentials: WireCredentials | undefined;
  return {
    clockOffset: 0,
    region: async () => {
      if (!region) throw new Error('AWS_REGION is not set: the DynamoDB region is unknown');
      return region;
    },
    credentials: async () => {
      credentials ??= local
        ? {
            accessKeyId: env.AWS_ACCESS_KEY_ID ?? 'local',
            secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? 'local',
          }
        : credentialsFromEnv(env);
      return credentials;
    },
    endpoint: async () => {
      if (local) return endpointOfUrl(new URL(local));
      if (!region) throw new Error('AWS_REGION is not set: the DynamoDB region is unknown');
      return {
        protocol: 'https:',
        hostname: regionalHost('dynamodb', region, env),
        port: undefined,
        path: '/',
      };
    },
  };
}

/** The environment's credentials, as the SDK's `fromEnv` reads them, or the error it throws without them. */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): WireCredentials {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey)
    throw Object.assign(new Error('Unable to find environment variable credentials.'), {
      name: 'CredentialsProviderError',
    });
  return {
    accessKeyId,
    secretAccessKey,
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
  };
}

/**
 * An SDK client's region, credentials (its provider, which keeps them until they are about to
 * expire), endpoint (a configured one, else its endpoint rules' for the region) and clock offset (the
 * client's own, so both sign with it): for the callers that hand the store a client.
 */
export function connectionOfClient(client: DynamoDBClient): WireConnection {
  const config = client.config;
  return {
    get clockOffset() {
      return config.systemClockOffset ?? 0;
    },
    set clockOffset(offset: number) {
      config.systemClockOffset = offset;
    },
    region: () => config.region(),
    credentials: () => config.credentials(),
    endpoint: async () => {
      if (config.isCustomEndpoint && config.endpoint) {
        const custom = await config.endpoint();
        return {
          protocol: custom.protocol === 'https:' ? 'https:' : 'http:',
          hostname: custom.hostname,
          port: custom.port,
          path: custom.path || '/',
        };
      }
      const { url } = config.endpointProvider({
        Region: await config.region(),
        UseFIPS: await config.useFipsEndpoint(),
        UseDualStack: await config.useDualstackEndpoint(),
      });
      return endpointOfUrl(url);
    },
  };
}
