from babbler.daemon.caps import effective_caps, missing_caps

STATUS = """Name:\tbabblerd
Uid:\t999\t999\t999\t999
CapInh:\t0000000000003000
CapPrm:\t0000000000003000
CapEff:\t0000000000003000
CapBnd:\t0000000000003000
CapAmb:\t0000000000003000
"""


def test_the_units_ambient_capabilities_are_enough() -> None:
    assert effective_caps(STATUS) == 0x3000
    assert missing_caps(effective_caps(STATUS)) == []


def test_missing_capabilities_are_named() -> None:
    assert missing_caps(0x1000) == ["CAP_NET_RAW"]
    assert missing_caps(effective_caps("Name:\tx\n")) == ["CAP_NET_ADMIN", "CAP_NET_RAW"]
