import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { Controller, Get, Header, NotFoundException, Param, Res } from '@nestjs/common';
import type { Response } from 'express';
import { UNARY_JSON_METHODS } from '@ironflow/rpc';
import { PublicRoute } from '../http/api-key.guard';

/** Where `npm run build` puts the UI (`dist/ui`), from the compiled services or from the sources (tests). */
export function uiAssetsDir(): string | undefined {
  const candidates = [resolve(__dirname, '../../../../ui'), resolve(__dirname, '../../../../dist/ui')];
  return candidates.find((dir) => existsSync(resolve(dir, 'index.html')));
}

/** A file name the UI build writes: no directories, no dot files. */
const ASSET = /^[a-z0-9][a-z0-9-]*\.(js|css|js\.map)$/;

/**
 * The runs UI (`libs/ui`), served by the api-gateway and so by `ironflow dev`: `GET /` is the page,
 * `GET /ui/<file>` its scripts and styles from the build output, `GET /ui/config.json` what the
 * API offers the UI (the pause/resume buttons appear once `PauseRun`/`ResumeRun` exist). Nothing
 * else: the UI reads the REST and Connect routes of the client API like any client. Public (no API
 * key): the page carries no data; its API calls send the key typed in it.
 */
@PublicRoute()
@Controller()
export class UiController {
  private readonly dir = uiAssetsDir();

  @Get()
  page(@Res() res: Response): void {
    if (!this.dir) {
      res.status(404).json({ code: 'NOT_FOUND', message: 'the runs UI is not built: run npm run build' });
      return;
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile('index.html', { root: this.dir });
  }

  /** `{actions: {pause, resume}}`: which run actions the client API has. */
  @Get('ui/config.json')
  @Header('Cache-Control', 'no-cache')
  config() {
    return { actions: { pause: UNARY_JSON_METHODS.includes('PauseRun'), resume: UNARY_JSON_METHODS.includes('ResumeRun') } };
  }

  @Get('ui/:file')
  asset(@Param('file') file: string, @Res() res: Response): void {
    if (!this.dir || !ASSET.test(file) || !existsSync(resolve(this.dir, file))) throw new NotFoundException(`no UI file ${file}`);
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(file, { root: this.dir });
  }
}
