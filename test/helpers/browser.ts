// Browser tests drive Debian's Chromium through playwright-core: one browser
// per test file, a fresh context (own cookies) per person, a screenshot of a
// failing test's page in test-results/browser/<test name>.png. Without
// Chromium (CHROMIUM_PATH or /usr/bin/chromium) the files skip with one line.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import type { Test } from 'tap';
import { sourceRoot } from './paths.ts';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

// Without the background-networking flags Chromium reaches out to Google
// hosts at start, which a closed network refuses (and which tests must not need).
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const SCREENSHOTS = path.join(sourceRoot, 'test-results/browser');

/** Why this machine cannot run the browser tests, or null when it can. */
function browserUnavailable(): string | null {
  return existsSync(CHROMIUM_PATH)
    ? null
    : `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH)`;
}

/**
 * Launches Chromium for this test file, closed when the file ends. Playwright
 * gives every launch a fresh temporary user-data-dir and removes it on close.
 */
async function launchBrowser(t: Test): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: ARGS, headless: true, timeout: 30_000 });
  t.teardown(() => browser.close());
  return browser;
}

/**
 * A browser test file's frame: Chromium launched for the file and handed to
 * `body`, or, where this machine has none, the file reported skipped with why.
 */
export async function withChromium(t: Test, body: (browser: Browser) => Promise<void>): Promise<void> {
  const unavailable = browserUnavailable();
  if (unavailable) {
    t.test('browser tests', { skip: unavailable }, () => {});
    return;
  }
  await body(await launchBrowser(t));
}

const fileName = (name: string) =>
  name
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 120) || 'test';

/**
 * A page in a context of its own (a person with their own cookies). When the
 * test `t` fails, the page is photographed before the context closes.
 */
export async function openPage(t: Test, browser: Browser, options: BrowserContextOptions = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1024, height: 768 }, ...options });
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  t.teardown(async () => {
    if (!t.passing()) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page
        .screenshot({ path: path.join(SCREENSHOTS, `${fileName(t.name)}.png`), fullPage: true })
        .catch(() => undefined);
    }
    await context.close();
  });
  return page;
}

/** The text of every element matching a selector, trimmed. */
export const textsOf = (page: Page, selector: string) =>
  page
    .locator(selector)
    .allInnerTexts()
    .then((all) => all.map((s) => s.trim()));

/** Whether the page scrolls sideways (at a phone's width, it must not). */
export const scrollsSideways = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

/**
 * Words of the page's text that a line break cuts in two: each word (split
 * at spaces and at the hyphens and slashes where a line may break) must sit
 * on one line, unless it is wider than the page's text column. URLs (.url) and
 * preformatted text may break anywhere.
 */
export const brokenWords = (page: Page, selector: string) =>
  page.evaluate((selector) => {
    const broken: string[] = [];
    for (const el of document.querySelectorAll(selector)) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement?.closest('pre, .url, svg')) continue;
        const text = node.textContent ?? '';
        for (const m of text.matchAll(/[^\s\-/]+/g)) {
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const rects = [...range.getClientRects()];
          const lines = new Set(rects.map((r) => Math.round(r.top)));
          // A word wider than the page's text column may only break (a squeezed cell is no excuse).
          const line = document.querySelector('main')?.clientWidth ?? window.innerWidth;
          const wide = rects.reduce((w, r) => w + r.width, 0);
          if (lines.size > 1 && wide <= line) broken.push(`${el.tagName.toLowerCase()}: ${m[0]}`);
        }
      }
    }
    return broken;
  }, selector);
