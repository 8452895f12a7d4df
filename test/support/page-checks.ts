/**
 * What every dashboard page is held to in the browser tests, at the two widths it is judged at
 * (1280 px, a laptop, and 390 px, a phone): a full-page screenshot at each (for a person to look at),
 * no sideways scroll (the page's width fits the viewport's), and no accessibility violation that
 * axe-core finds (WCAG 2.1 A and AA rules). The page is left at its width before the call.
 */
import AxeBuilder from '@axe-core/playwright';
import type { Page } from 'playwright-core';

export const WIDTHS = [1280, 390] as const;

/** Screenshots `name-1280.png` and `name-390.png` into `dir`; what the page got wrong at either width. */
export async function judgePage(page: Page, dir: string, name: string): Promise<string[]> {
  const problems: string[] = [];
  const before = page.viewportSize() ?? { width: 1280, height: 800 };
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: width > 600 ? 800 : 844 });
    await page.screenshot({ path: `${dir}/${name}-${width}.png`, fullPage: true });
    // A string, run in the page (the tests' TypeScript has no DOM types).
    const overflow = Number(
      await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'),
    );
    if (overflow > 0) problems.push(`${name} at ${width} px scrolls sideways by ${overflow} px`);
  }
  await page.setViewportSize(before);
  const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  for (const violation of axe.violations)
    problems.push(
      `${name}: ${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes
        .slice(0, 3)
        .map((node) => node.target.join(' '))
        .join(', ')}`,
    );
  return problems;
}
