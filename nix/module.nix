# NixOS module: services.babblerd. The service has the same sandbox as systemd/babblerd.service
# (tests/service/test_nix.py keeps the two in step). babblerd makes the kernel setup the mesh
# needs itself and puts it back on stop (docs/operations.md); the mesh key file stays root's
# and reaches the service as the systemd credential `mesh.key`.
{
  config,
  lib,
  pkgs,
  ...
}:

let
  cfg = config.services.babblerd;
  toml = pkgs.formats.toml { };
  configFile = toml.generate "babblerd.toml" (
    {
      mode = cfg.mode;
      hello-interval = cfg.helloInterval;
    }
    // lib.optionalAttrs (cfg.interfaces != [ ]) { interface = cfg.interfaces; }
    // lib.optionalAttrs (cfg.exclude != [ ]) { exclude = cfg.exclude; }
  );
in
{
  options.services.babblerd = {
    enable = lib.mkEnableOption "babblerd, which addresses and routes Thunderbolt and Ethernet links with babeld";

    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./package.nix { babeld = pkgs.callPackage ./babeld.nix { }; };
      description = "The babbler package (babblerd, babblerctl, babbler-lab).";
    };

    interfaces = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [ "enp*" "thunderbolt*" ];
      description = "Use exactly the links matching these globs. Empty: every physical wired link.";
    };

    exclude = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [ "eno1" ];
      description = "Never use links matching these globs (wins over interfaces), e.g. the LAN uplink.";
    };

    mode = lib.mkOption {
      type = lib.types.enum [
        "on-demand"
        "always"
      ];
      default = "always";
      description = "always: the mesh runs from start to stop, so nodes reach each other with nothing else running; on-demand: only while a local client monitors or watches (each node needs its own).";
    };

    keyFile = lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "/etc/babbler/mesh.key";
      description = "Mesh key file (root's, 0600; make one with babblerctl keygen), handed to the service as the systemd credential mesh.key. Only nodes with the same key are neighbours.";
    };

    helloInterval = lib.mkOption {
      type = lib.types.numbers.between 0.02 600;
      default = 0.1;
      description = "babeld hello interval on every link, in seconds.";
    };
  };

  config = lib.mkIf cfg.enable {
    environment.systemPackages = [ cfg.package ];

    users.users.babbler = {
      isSystemUser = true;
      group = "babbler";
      description = "babbler mesh daemon";
    };
    users.groups.babbler = { };

    systemd.services.babblerd = {
      description = "babbler: addresses and routes over Thunderbolt and Ethernet links";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-pre.target" ];
      after = [ "network-pre.target" ];
      reloadTriggers = [ configFile ];
      serviceConfig = {
        Type = "notify";
        NotifyAccess = "main";
        ExecStart = "${cfg.package}/bin/babblerd --config ${configFile}";
        ExecReload = "${pkgs.coreutils}/bin/kill -HUP $MAINPID";
        Restart = "on-failure";
        RestartSec = "1s";
        TimeoutStopSec = "10s";
        WatchdogSec = "30s";

        User = "babbler";
        Group = "babbler";
        RuntimeDirectory = "babbler";
        RuntimeDirectoryMode = "0755";
        StateDirectory = "babbler";
        StateDirectoryMode = "0700";
        UMask = "0077";
        LoadCredential = lib.optional (cfg.keyFile != null) "mesh.key:${cfg.keyFile}";

        CapabilityBoundingSet = "CAP_NET_ADMIN CAP_NET_RAW";
        AmbientCapabilities = "CAP_NET_ADMIN CAP_NET_RAW";
        NoNewPrivileges = "yes";
        RestrictAddressFamilies = "AF_UNIX AF_NETLINK AF_INET AF_INET6";
        IPAddressDeny = "any";
        IPAddressAllow = "localhost link-local multicast fde0:20c6:1fa7::/48 10.77.0.0/16";
        ProtectSystem = "strict";
        ProtectHome = "yes";
        PrivateTmp = "yes";
        PrivateDevices = "yes";
        DevicePolicy = "closed";
        ProtectKernelModules = "yes";
        ProtectKernelLogs = "yes";
        ProtectControlGroups = "yes";
        ProtectClock = "yes";
        ProtectHostname = "yes";
        ProtectProc = "invisible";
        PrivateMounts = "yes";
        RestrictNamespaces = "yes";
        RestrictRealtime = "yes";
        RestrictSUIDSGID = "yes";
        LockPersonality = "yes";
        MemoryDenyWriteExecute = "yes";
        KeyringMode = "private";
        RemoveIPC = "yes";
        SystemCallArchitectures = "native";
        SystemCallFilter = [
          "@system-service"
          "~@privileged @resources"
          "pidfd_getfd"
        ];
        SystemCallErrorNumber = "EPERM";
      };
    };
  };
}
