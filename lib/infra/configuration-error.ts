/**
 * A deploy's configuration that cannot work (a context value missing, out of range, or one that
 * contradicts another): the CDK app (bin/app.ts) prints its message as one line and exits 1, with no
 * stack trace, which would only point into the code that noticed it.
 */
export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}
