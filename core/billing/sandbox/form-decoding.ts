// Stripe's v1 request encoding: application/x-www-form-urlencoded with
// bracket paths (`metadata[tenant_id]=x`, `line_items[0][price]=p`,
// `expand[]=a`), decoded into plain objects and arrays of strings. An empty
// value stays '' (Stripe's "unset"). Objects have no prototype, so a key like
// `__proto__` is only data.
export type FormValue = string | FormValue[] | FormObject;
export type FormObject = { [key: string]: FormValue };

export class FormDecodeError extends Error {
  override name = 'FormDecodeError';
}

const MAX_PAIRS = 1000;
const MAX_DEPTH = 6;
const MAX_INDEX = 999;

const newObject = (): FormObject => Object.create(null) as FormObject;

/** `a[b][0]` → ['a', 'b', '0']; `a[]` → ['a', '']. */
function segments(key: string): string[] {
  const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
  if (!match) throw new FormDecodeError(`Invalid parameter name: ${key.slice(0, 100)}`);
  const rest = match[2] ? [...match[2].matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1]!) : [];
  if (rest.length + 1 > MAX_DEPTH) throw new FormDecodeError(`Parameter nested too deeply: ${key.slice(0, 100)}`);
  return [match[1]!, ...rest];
}

export function decodeForm(body: string): FormObject {
  const root = newObject();
  let pairs = 0;
  for (const [key, value] of new URLSearchParams(body)) {
    if (++pairs > MAX_PAIRS) throw new FormDecodeError('Too many parameters.');
    const path = segments(key);
    let node = root;
    path.forEach((segment, i) => {
      const last = i === path.length - 1;
      // `expand[]=x` appends: give it the next free numeric index.
      const name = segment === '' ? String(Object.keys(node).length) : segment;
      const existing = node[name];
      if (last) {
        if (existing !== undefined) throw new FormDecodeError(`Parameter given twice: ${key.slice(0, 100)}`);
        node[name] = value;
        return;
      }
      if (existing === undefined) node = node[name] = newObject();
      else if (typeof existing === 'object' && !Array.isArray(existing)) node = existing;
      else throw new FormDecodeError(`Parameter is both a value and an object: ${key.slice(0, 100)}`);
    });
  }
  return toArrays(root) as FormObject;
}

/** Objects whose keys are all indexes become arrays, in index order. */
function toArrays(value: FormValue): FormValue {
  if (typeof value === 'string' || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  for (const key of keys) value[key] = toArrays(value[key]!);
  if (keys.length > 0 && keys.every((k) => /^\d{1,3}$/.test(k) && Number(k) <= MAX_INDEX)) {
    return keys.sort((a, b) => Number(a) - Number(b)).map((k) => value[k]!);
  }
  return value;
}
