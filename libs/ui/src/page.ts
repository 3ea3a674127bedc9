/** What the router hands a page: where to draw, the hash's query, and whether it is still shown. */
export interface PageContext {
  main: HTMLElement;
  params: URLSearchParams;
  /** False once the user went to another page (stop polling, drop late answers). */
  alive(): boolean;
}
