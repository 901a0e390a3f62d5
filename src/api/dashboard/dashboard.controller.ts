import { Controller, Get, Inject, Logger, NotFoundException, Param, Res } from '@nestjs/common';
import { ApplicationConfig } from '@nestjs/core';
import { ApiExcludeController } from '@nestjs/swagger';
import { API_SHAPE, type ResolvedApiShape } from '../api.module-definition';
import type { HttpResponse } from '../http/http-types';
import {
  loadDashboardAssets,
  renderDashboardPage,
  type DashboardAsset,
  type DashboardPlaces,
} from './dashboard-assets';

/** Where the dashboard's script, style sheet and icon are served (`<page>/dashboard/<file>`). */
export const DASHBOARD_ASSETS_PATH = 'dashboard';

/**
 * The page may load and connect to its own origin only (the Socket.IO client is served by the
 * server at `/socket.io/socket.io.min.js`): no inline script or style, no other host.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'self'",
  "object-src 'none'",
].join('; ');

/** Express's `send` (sets the ETag and answers 304 to a matching `If-None-Match`). */
interface SendingResponse extends HttpResponse {
  send(body: Buffer): this;
}

/** `/`-joined path of non-empty parts, with a leading slash (`''` for none). */
const pathOf = (...parts: string[]) => {
  const joined = parts
    .map((part) => part.replace(/^\/+|\/+$/g, ''))
    .filter(Boolean)
    .join('/');
  return joined ? `/${joined}` : '';
};

/**
 * The operators' dashboard (README.md, "Dashboard") at the module's dashboard path (`GET /` of
 * the server, `GET /<path>` embedded): a static page and a small script read once at
 * start-up, the page told where the module's routes and namespace are. Not guarded: the page
 * holds no data; everything it shows comes over the authenticated socket and REST routes, with
 * the admin token the operator types in.
 */
@ApiExcludeController()
@Controller()
export class DashboardController {
  private readonly logger = new Logger('Dashboard');
  private readonly assets: ReadonlyMap<string, DashboardAsset>;
  private page?: DashboardAsset;

  constructor(
    @Inject(API_SHAPE) private readonly shape: ResolvedApiShape,
    private readonly app: ApplicationConfig,
  ) {
    try {
      this.assets = loadDashboardAssets();
    } catch (error) {
      // The API works without its dashboard: say so once rather than refuse to start.
      this.logger.warn(`GET / will answer 404: ${(error as Error).message}`);
      this.assets = new Map();
    }
  }

  @Get()
  index(@Res() response: SendingResponse): void {
    this.send(response, 'index.html');
  }

  @Get(`${DASHBOARD_ASSETS_PATH}/:file`)
  asset(@Param('file') file: string, @Res() response: SendingResponse): void {
    if (file === 'index.html') throw new NotFoundException('No such dashboard file');
    this.send(response, file);
  }

  /** Where the page finds the routes: read at the first request, once the prefix is set. */
  private places(): DashboardPlaces {
    const prefix = this.app.getGlobalPrefix();
    const { path, dashboard, namespace } = this.shape;
    return {
      apiBase: pathOf(prefix, path),
      namespace,
      assets: pathOf(prefix, dashboard || '', DASHBOARD_ASSETS_PATH),
    };
  }

  private send(response: SendingResponse, name: string): void {
    let asset = this.assets.get(name);
    if (asset && name === 'index.html') {
      this.page ??= { ...asset, body: renderDashboardPage(asset.body, this.places()) };
      asset = this.page;
    }
    if (!asset) throw new NotFoundException('No such dashboard file');
    response.setHeader('Content-Type', asset.contentType);
    response.setHeader('Content-Security-Policy', DASHBOARD_CSP);
    response.setHeader('X-Content-Type-Options', 'nosniff');
    response.setHeader('Referrer-Policy', 'no-referrer');
    response.setHeader('Cache-Control', 'no-cache');
    response.send(asset.body);
  }
}
