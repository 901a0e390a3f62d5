import { join, resolve } from 'node:path';
import {
  DASHBOARD_FILES,
  dashboardFolders,
  findDashboardFolder,
  loadDashboardAssets,
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
    expect(assets.get('index.html')!.body.toString('utf8')).toContain('/dashboard/dashboard.js');
  });

  it('as from dist/api/dashboard: found in src/api/dashboard of the package root', () => {
    const root = resolve(SOURCES, '..', '..', '..');

    expect(findDashboardFolder(dashboardFolders(join(root, 'dist', 'api', 'dashboard')))).toBe(
      SOURCES,
    );
  });

  it('missing: an error naming the folders searched', () => {
    expect(() => loadDashboardAssets(['/nowhere/a', '/nowhere/b'])).toThrow(
      /Dashboard files \(index\.html, .*\) not found in \/nowhere\/a or \/nowhere\/b/,
    );
  });
});
