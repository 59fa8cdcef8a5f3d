// The dashboard: server-rendered HTML pages on the admin listener for people
// who want to see the fleet rather than script it. Separate from the admin
// API because its audience and its security model differ (a browser: login
// with the admin token, a session cookie, CSRF-checked forms), while its data
// are the admin API's own in-process views, so it never contradicts `ctl`.
export { registerDashboard, type DashboardOptions } from './routes.js';
