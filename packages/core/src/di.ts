/**
 * The one dependency-injection container implementation every package shares.
 * reflect-metadata must be evaluated before tsyringe, so it is imported here first;
 * plugins import these names from @fastkernels/core, never from tsyringe directly.
 */
import 'reflect-metadata';
export { container, inject, injectAll, injectable, singleton, Lifecycle, type DependencyContainer, type InjectionToken } from 'tsyringe';
