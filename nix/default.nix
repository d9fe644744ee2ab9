# babbler for nix: `nix-build nix -A babbler`, `nix-build nix -A babeld`; on NixOS import
# `(import ./nix { }).module` (or nix/module.nix) and set services.babblerd.enable = true.
{
  pkgs ? import <nixpkgs> { },
}:

rec {
  babeld = pkgs.callPackage ./babeld.nix { };
  babbler = pkgs.callPackage ./package.nix { inherit babeld; };
  module = ./module.nix;
}
