// A validation issue in words a person reads: which field, where it goes, and
// what is expected ("The x-tenant-id header is missing (expected a string).
// It names the workspace ..."), instead of the validator's own phrasing.
import type { ValidationIssue } from './errors.ts';

/** What a few fields mean and where their values come from, added when they are missing. */
const HINTS: Record<string, string> = {
  'header.x-tenant-id':
    'It names the workspace to act in: a tenant id from GET /api/tenants/ (or the tenantId that POST /api/chat/init answers).',
  'header.idempotency-key':
    'Send a key of your own (8-200 printable characters), and the same key again when you retry this request.',
  'header.authorization': 'Send "Authorization: Bearer <token>"; POST /api/auth/login answers a token.',
};

const PLACES: Record<string, (name: string) => string> = {
  header: (name) => `the ${name} header`,
  query: (name) => `the query parameter ${name}`,
  path: (name) => `the path parameter ${name}`,
  body: (name) => (name ? `the body field ${name}` : 'the body'),
};

const article = (word: string) => (/^[aeiou]/i.test(word) ? 'an' : 'a');
const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

export function issueInWords(issue: ValidationIssue): string {
  const [context = 'body', ...rest] = issue.path.split('.');
  const name = rest.join('.');
  const subject = (PLACES[context] ?? PLACES.body!)(name);
  const expected = /expected (\w+)/.exec(issue.message)?.[1];
  const missing = /received undefined|required property/i.test(issue.message);
  if (missing) {
    const hint = HINTS[issue.path];
    return `${capitalized(subject)} is missing${expected ? ` (expected ${article(expected)} ${expected})` : ''}.${hint ? ` ${hint}` : ''}`;
  }
  const said = issue.message.replace(/^Invalid input:\s*/i, '').replace(/\.$/, '');
  return `${capitalized(subject)} is not valid: ${said}.`;
}

/** The message of a 400 with these issues: the first in words, and how many more the details list. */
export function validationMessage(issues: ValidationIssue[]): string {
  const [first] = issues;
  if (!first) return 'Invalid request.';
  const more = issues.length - 1;
  return `${issueInWords(first)}${more > 0 ? ` (${more} more problem${more === 1 ? '' : 's'} in details.)` : ''}`;
}
