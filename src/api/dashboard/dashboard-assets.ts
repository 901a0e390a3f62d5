import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** One file of the dashboard, as served. */
export interface DashboardAsset {
  body: Buffer;
  contentType: string;
}

/** The files of the dashboard (next to this module in `src/api/dashboard`), by served name. */
export const DASHBOARD_FILES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/**
 * Folders that may hold the files: this module's own folder (`src/api/dashboard` when run from
 * the sources, under jest or ts-node; `dist/api/dashboard` in the package, where `npm run
 * build` copies them), then `src/api/dashboard` of the package root (a `dist` built by `tsc`
 * alone, which copies no asset).
 */
export function dashboardFolders(here: string = __dirname): string[] {
  return [here, resolve(here, '..', '..', '..', 'src', 'api', 'dashboard')];
}

/** The first folder that holds every dashboard file, or `undefined`. */
export function findDashboardFolder(folders = dashboardFolders()): string | undefined {
  const names = Object.keys(DASHBOARD_FILES);
  return folders.find((folder) => names.every((name) => existsSync(join(folder, name))));
}

/**
 * Reads the dashboard's files once. Throws an error naming the folders searched when they
 * are not found.
 */
export function loadDashboardAssets(
  folders = dashboardFolders(),
): ReadonlyMap<string, DashboardAsset> {
  const folder = findDashboardFolder(folders);
  if (!folder) {
    throw new Error(
      `Dashboard files (${Object.keys(DASHBOARD_FILES).join(', ')}) not found in ${folders.join(' or ')}`,
    );
  }
  return new Map(
    Object.entries(DASHBOARD_FILES).map(([name, contentType]) => [
      name,
      { body: readFileSync(join(folder, name)), contentType },
    ]),
  );
}

/** Where the page finds the module's routes and its own files. */
export interface DashboardPlaces {
  /** Path of the REST routes (`/agent`, `/api/agent`). */
  apiBase: string;
  /** Socket.IO namespace (`/agent`). */
  namespace: string;
  /** Path of the page's script, style sheet and icon (`/dashboard`, `/api/agent/dashboard`). */
  assets: string;
}

const escapeAttribute = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The page with its places filled in (`{{apiBase}}`, `{{namespace}}`, `{{assets}}`). */
export function renderDashboardPage(page: Buffer, places: DashboardPlaces): Buffer {
  const text = page
    .toString('utf8')
    .replace(/\{\{(apiBase|namespace|assets)\}\}/g, (_, name: keyof DashboardPlaces) =>
      escapeAttribute(places[name]),
    );
  return Buffer.from(text, 'utf8');
}
