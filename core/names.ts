// What a name may hold: the name of a workspace, a person (display name),
// a company, an agent, a runner. Names reach pages and plain-text e-mails,
// where a line break starts a line of its own (a workspace named
// "Acme\r\nBcc: leak@evil.test" would forge a line in an invitation's
// body), so no control character (Unicode category Cc: NUL, TAB, CR, LF,
// ESC, DEL, C1) nor the line and paragraph separators U+2028 and U+2029
// may be in one. Routes refuse such a name with a 400 that says so; text
// that arrives otherwise (a provider's claims, rows stored before the rule)
// is flattened onto one line.
import { z } from 'zod';

// Spelled with explicit ranges (not \p{Cc}) so that it reads the same as an
// OpenAPI pattern, without the `u` flag. Control characters are the point
// of these expressions, hence the lint exemptions.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u001F\u007F-\u009F\u2028\u2029]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROLS = /[\u0000-\u001F\u007F-\u009F\u2028\u2029]+/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const NO_CONTROL = /^[^\u0000-\u001F\u007F-\u009F\u2028\u2029]*$/;

export const NAME_MAX_LENGTH = 200;

/** Said when a name holds one: on the API in the 400's message, on pages beside the form. */
export const NAME_CONTROL_MESSAGE =
  'a name must be one line without control characters (no line breaks, tabs or other control codes)';

export const hasControlCharacter = (value: string): boolean => CONTROL.test(value);

/** A name's schema: one line, no control characters, trimmed, 1 to `max` characters. */
export const nameSchema = (max = NAME_MAX_LENGTH) =>
  z.string().regex(NO_CONTROL, { message: NAME_CONTROL_MESSAGE }).trim().min(1).max(max);

/** Text from elsewhere made a one-line name: each run of control characters becomes a space. */
export const flattenName = (value: string): string => value.replace(CONTROLS, ' ').trim();

/** What is wrong with a name typed into a form, or null when it is fine. */
export function nameProblem(value: string, max = NAME_MAX_LENGTH): string | null {
  if (hasControlCharacter(value)) return `Your name cannot be used: ${NAME_CONTROL_MESSAGE}.`;
  const trimmed = value.trim();
  if (!trimmed || trimmed.length > max) return `Enter your name (at most ${max} characters).`;
  return null;
}
