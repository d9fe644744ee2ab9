# babeld 1.13.1 from its release tarball, with its man page (in the `man` output).
{
  lib,
  stdenv,
  fetchurl,
}:

stdenv.mkDerivation (finalAttrs: {
  pname = "babeld";
  version = "1.13.1";

  src = fetchurl {
    url = "https://www.irif.fr/~jch/software/files/babeld-${finalAttrs.version}.tar.gz";
    # The release tarball's hash, as nixpkgs records it for the same file.
    hash = "sha256-FfJNJtoMz8Bzq83vAwnygeRoTyqnESb4JlcsTIRejdk=";
  };

  outputs = [
    "out"
    "man"
  ];

  # babeld's Makefile installs the program and babeld.8 under these.
  makeFlags = [
    "PREFIX=${placeholder "out"}"
    "MANDIR=${placeholder "man"}/share/man"
    "ETCDIR=${placeholder "out"}/etc"
  ];

  meta = {
    description = "Babel, a loop-avoiding distance-vector routing protocol";
    homepage = "https://www.irif.fr/~jch/software/babel/";
    license = lib.licenses.mit;
    mainProgram = "babeld";
    # Linux (netlink) and BSD/macOS (routing sockets) are both in babeld's sources.
    platforms = lib.platforms.linux ++ lib.platforms.darwin;
  };
})
