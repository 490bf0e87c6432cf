// A configuration the platform refuses. Its message names each bad variable on
// a line of its own, so one start reports every mistake at once.
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A ConfigError from lines such as `PORT: expected a number`. */
export const configError = (lines: string[]) =>
  new ConfigError(`Invalid configuration:\n${lines.map((line) => `  ${line}`).join('\n')}`);
