import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  DASHBOARD_FILES,
  dashboardFolders,
  findDashboardFolder,
  loadDashboardAssets,
  renderDashboardPage,
} from '../../../../src/api/dashboard/dashboard-assets';

/** Where the dashboard's files live in the sources. */
const SOURCES = resolve(__dirname, '../../../../src/api/dashboard');

describe('dashboard assets', () => {
  it('are looked for beside the module, then in src/api/dashboard of the package (from dist)', () => {
    const root = resolve('/srv/app');

    expect(dashboardFolders(join(root, 'dist', 'api', 'dashboard'))).toEqual([
      join(root, 'dist', 'api', 'dashboard'),
      join(root, 'src', 'api', 'dashboard'),
    ]);
  });

  it('from the sources: every file is found beside this module', () => {
    expect(findDashboardFolder()).toBe(SOURCES);
    const assets = loadDashboardAssets();

    expect([...assets.keys()].sort()).toEqual(Object.keys(DASHBOARD_FILES).sort());
    expect(assets.get('index.html')!.body.toString('utf8')).toContain('{{assets}}/dashboard.js');
  });

  it('the page is told where the routes, the namespace and its files are (escaped)', () => {
    const page = renderDashboardPage(loadDashboardAssets().get('index.html')!.body, {
      apiBase: '/api/agent',
      namespace: '/agent"x',
      assets: '/api/agent/dashboard',
    }).toString('utf8');

    expect(page).toContain('<meta name="agent-api-base" content="/api/agent" />');
    expect(page).toContain('<meta name="agent-namespace" content="/agent&quot;x" />');
    expect(page).toContain('<script src="/api/agent/dashboard/dashboard.js" defer></script>');
    expect(page).toContain('href="/api/agent/dashboard/dashboard.css"');
    expect(page).not.toContain('{{');
  });

  it('as from a dist/api/dashboard without the files: found in src/api/dashboard of the root', () => {
    const root = mkdtempSync(join(tmpdir(), 'dashboard-root-'));
    try {
      mkdirSync(join(root, 'dist', 'api', 'dashboard'), { recursive: true });
      cpSync(SOURCES, join(root, 'src', 'api', 'dashboard'), { recursive: true });
      const found = findDashboardFolder(dashboardFolders(join(root, 'dist', 'api', 'dashboard')));

      expect(found).toBe(join(root, 'src', 'api', 'dashboard'));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('as from the package: found beside the module in dist/api/dashboard first', () => {
    const root = mkdtempSync(join(tmpdir(), 'dashboard-root-'));
    try {
      cpSync(SOURCES, join(root, 'dist', 'api', 'dashboard'), { recursive: true });
      const found = findDashboardFolder(dashboardFolders(join(root, 'dist', 'api', 'dashboard')));

      expect(found).toBe(join(root, 'dist', 'api', 'dashboard'));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('missing: an error naming the folders searched', () => {
    expect(() => loadDashboardAssets(['/nowhere/a', '/nowhere/b'])).toThrow(
      /Dashboard files \(index\.html, .*\) not found in \/nowhere\/a or \/nowhere\/b/,
    );
  });
});
