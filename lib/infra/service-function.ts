import { fileURLToPath } from 'node:url';
import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Architecture, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

/** The repository root, for the function entry points (infrastructure never imports runtime code). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ServiceFunctionProps {
  /** Entry file relative to the repository root, e.g. `functions/completions/handler.ts`. */
  entry: string;
  memorySize: number;
  timeout: Duration;
  environment?: Record<string, string>;
  reservedConcurrentExecutions?: number;
  logRetention: RetentionDays;
  removalPolicy: RemovalPolicy;
}

/**
 * What every function shares: Node.js 22 on arm64, an ESM bundle built by the local esbuild
 * (minified, with source maps), its own log group with retention, and X-Ray tracing.
 */
export class ServiceFunction extends Construct {
  readonly fn: NodejsFunction;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: ServiceFunctionProps) {
    super(scope, id);
    this.logGroup = new LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.fn = new NodejsFunction(this, 'Function', {
      entry: `${REPO_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}package-lock.json`,
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      ...(props.reservedConcurrentExecutions !== undefined
        ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions }
        : {}),
      logGroup: this.logGroup,
      tracing: Tracing.ACTIVE,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_SERVICE_NAME: 'hosted-model-api',
        POWERTOOLS_METRICS_NAMESPACE: 'HostedModelApi',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node22',
        minify: true,
        sourceMap: true,
        mainFields: ['module', 'main'],
        // ESM bundles of CommonJS dependencies still call require().
        banner: "import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);",
        forceDockerBundling: false,
      },
    });
  }
}
