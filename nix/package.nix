# babbler: babblerd, babblerctl and babbler-lab, with babeld on babblerd's PATH.
{
  lib,
  stdenv,
  python3Packages,
  babeld,
}:

python3Packages.buildPythonApplication {
  pname = "babbler";
  version = "0.1.0";
  pyproject = true;

  src = lib.cleanSource ../.;

  build-system = [ python3Packages.setuptools ];

  dependencies =
    with python3Packages;
    [
      trio
      structlog
      click
      anyio
      # babblerctl's live views (top, web, metrics)
      rich
      starlette
      hypercorn
      prometheus-client
    ]
    ++ lib.optionals stdenv.hostPlatform.isLinux [ pyroute2 ]
    # netifaces-plus installs the same `netifaces` module as nixpkgs' netifaces.
    ++ lib.optionals stdenv.hostPlatform.isDarwin [ netifaces ];

  makeWrapperArgs = [
    "--prefix"
    "PATH"
    ":"
    (lib.makeBinPath [ babeld ])
  ];

  # The test suite needs root, network namespaces and a running babeld: it runs in
  # babbler's own CI (scripts/test), not in the sandboxed nix build.
  doCheck = false;
  pythonImportsCheck = [
    "babbler.daemon.cli"
    "babbler.ctl.main"
  ];

  meta = {
    description = "Zero-configuration IPv6 mesh over Thunderbolt and Ethernet links, routed by babeld";
    license = lib.licenses.mit;
    mainProgram = "babblerd";
    platforms = lib.platforms.linux ++ lib.platforms.darwin;
  };
}
