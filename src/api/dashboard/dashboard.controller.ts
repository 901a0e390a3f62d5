import { Controller, Get, Logger, NotFoundException, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { THROTTLERS } from '../api.module-definition';
import { Public } from '../auth/auth.decorators';
import type { HttpResponse } from '../http/http-types';
import { loadDashboardAssets, type DashboardAsset } from './dashboard-assets';

/** Where the dashboard's script, style sheet and icon are served (`/dashboard/<file>`). */
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

/**
 * `GET /`: the operators' dashboard (README.md, "Dashboard"), a static page and a small script
 * read once at start-up. Public: the page holds no data; everything it shows comes over the
 * authenticated socket and REST routes, with the admin token the operator types in.
 */
@ApiExcludeController()
@Public()
@SkipThrottle({ [THROTTLERS.admin]: true })
@Controller()
export class DashboardController {
  private readonly logger = new Logger('Dashboard');
  private readonly assets: ReadonlyMap<string, DashboardAsset>;

  constructor() {
    try {
      this.assets = loadDashboardAssets();
    } catch (error) {
      // The API works without its dashboard: say so once rather than refuse to start.
      this.logger.warn(`GET / will answer 404: ${(error as Error).message}`);
      this.assets = new Map();
    }
  }

  @Get()
  page(@Res() response: SendingResponse): void {
    this.send(response, 'index.html');
  }

  @Get(`${DASHBOARD_ASSETS_PATH}/:file`)
  asset(@Param('file') file: string, @Res() response: SendingResponse): void {
    if (file === 'index.html') throw new NotFoundException('No such dashboard file');
    this.send(response, file);
  }

  private send(response: SendingResponse, name: string): void {
    const asset = this.assets.get(name);
    if (!asset) throw new NotFoundException('No such dashboard file');
    response.setHeader('Content-Type', asset.contentType);
    response.setHeader('Content-Security-Policy', DASHBOARD_CSP);
    response.setHeader('X-Content-Type-Options', 'nosniff');
    response.setHeader('Referrer-Policy', 'no-referrer');
    response.setHeader('Cache-Control', 'no-cache');
    response.send(asset.body);
  }
}
